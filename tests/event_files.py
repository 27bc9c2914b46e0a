"""What a training workdir's TensorBoard event files say, read back record by record (no
TensorBoard needed): the tests of both learners check their scalars against metrics.csv."""
import glob
import os
import struct


def tensorboard_scalars(workdir: str) -> dict[str, dict[int, float]]:
  """Every scalar in the run's event files (TFRecord framing: length, its CRC, an `Event`
  protobuf, its CRC), the newest event per step winning unless a later file's purge dropped
  it."""
  from tensorboardX.proto import event_pb2
  scalars: dict[str, dict[int, float]] = {}
  for path in sorted(glob.glob(os.path.join(workdir, "tb", "events.out.tfevents.*"))):
    with open(path, "rb") as f:
      data = f.read()
    position = 0
    while position < len(data):
      (length,) = struct.unpack("<Q", data[position:position + 8])
      event = event_pb2.Event.FromString(data[position + 12:position + 12 + length])
      position += 12 + length + 4
      if event.HasField("session_log") and event.step:  # A resumed run purges from here.
        for steps in scalars.values():
          for step in [s for s in steps if s >= event.step]:
            del steps[step]
      for value in event.summary.value:
        scalars.setdefault(value.tag, {})[event.step] = value.simple_value
  return scalars
