"""A training workdir's files, each written so that a kill loses nothing and duplicates
nothing: per-graph stages saved chunk by chunk (`per_graph_stage`), the metrics CSV cut back
to the checkpoint's step on resume (`truncate_metrics`), TensorBoard scalars synced per step
(`ScalarEvents`), the live progress of a long stage (`Progress`), and the config
`fingerprint` a checkpoint and the caches are matched by. `regal.train`'s two learners
(`train_lib`, `prior_train`) share them."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import time
import zipfile
from typing import Any

import ml_collections
import numpy as np
from absl import logging

from regal_datasets import atomic, cli
from regal.search import brkga_presets
from regal.search import progress as search_progress

PROGRESS_SECONDS = 5.0


class Progress:
  """Progress of a long stage ("48/160 graphs, 14 s, ~33 s left") on one live line
  (`progress.LiveLine`: rewritten on a terminal, a plain line every `PROGRESS_SECONDS`
  elsewhere); the latest is also what an interrupt line names (`cli.note_progress`)."""

  def __init__(self, what: str, total: int, done: int = 0, unit: str = "graphs",
               announce: bool = True, stream=None):
    self.what, self.total, self.done, self.unit = what, total, done, unit
    self.resumed, self.started = done, time.perf_counter()
    self.line = search_progress.LiveLine(stream, log_interval=PROGRESS_SECONDS)
    self.line.last_shown = self.started
    self._note()  # Before the line: an interrupt prompted by it must find the note.
    if announce:
      self.line.say(f"{what}: {total} {unit}"
                    + (f", {done} saved by an earlier run" if done else ""))

  def _note(self) -> None:
    cli.note_progress(f"{self.what}, {self.done} of {self.total} {self.unit} saved")

  def advance(self, count: int) -> None:
    self.done += count
    self._note()
    if self.line.due() and self.done < self.total:
      now = time.perf_counter()
      finished = self.done - self.resumed
      left = (f"~{(self.total - self.done) * (now - self.started) / finished:.0f} s left"
              if finished else "the first ones include compiling")
      self.line.update(f"  {self.what}: {self.done}/{self.total} {self.unit}, "
                       f"{now - self.started:.0f} s, {left}")

  def finish(self) -> None:
    seconds = time.perf_counter() - self.started
    if seconds >= PROGRESS_SECONDS or self.line.open:
      self.line.say(f"  {self.what}: done in {seconds:.1f} s")


def per_graph_stage(path: str, saved: str | None, what: str, indices: list[int],
                    compute, unit: str = "graphs") -> dict[int, Any]:
  """{graph index: result} of one training stage: what an earlier (killed) run saved in
  `saved` (usually `path` itself), then `compute(missing, on_done)` for the rest, which calls
  `on_done(indices, results)` as chunks finish; each is saved to `path` at once and reported
  at most every `PROGRESS_SECONDS`, so an interrupt loses at most the chunks in flight."""
  done = read_stage(saved) if saved else {}
  missing = [i for i in indices if i not in done]
  if not missing:
    return done
  progress = Progress(what, len(indices), len(indices) - len(missing), unit)

  def on_done(chunk: list[int], values: list) -> None:
    if chunk:
      done.update(zip(chunk, values))
      write_stage(path, done)
    progress.advance(len(chunk))

  compute(missing, on_done)
  progress.finish()
  return done


def read_stage(path: str) -> dict[int, Any]:
  """A per-graph stage file: {index: result} (.npz of arrays or .json of numbers); an
  unreadable file is recomputed."""
  try:
    if path.endswith(".npz"):
      with np.load(path) as stored:
        return {int(key[1:]): stored[key] for key in stored.files}
    with open(path) as f:
      return {int(key): value for key, value in json.load(f).items()}
  except (OSError, ValueError, KeyError, EOFError, AttributeError,
          zipfile.BadZipFile) as error:
    logging.warning("recomputing %s: unreadable (%s)", path, error)
    return {}


def write_stage(path: str, results: dict[int, Any]) -> None:
  if path.endswith(".npz"):
    buffer = io.BytesIO()
    np.savez(buffer, **{f"g{i}": value for i, value in sorted(results.items())})
    atomic.write_bytes(path, buffer.getvalue())
  else:
    atomic.write_text(path, json.dumps({str(i): value for i, value in sorted(results.items())}))


def truncate_metrics(path: str, step: int) -> None:
  """Keeps the rows of `metrics.csv` up to the checkpoint's `step`: a run killed after a row
  was appended but before its checkpoint was saved reruns that step, and must not log it
  twice (a partial last line goes too)."""
  if not os.path.exists(path):
    return
  with open(path, newline="") as f:
    lines = f.read().splitlines(keepends=True)
  keep = lines[:1] if lines and lines[0].endswith("\n") else []
  for line in lines[1:]:
    first = line.split(",", 1)[0]
    if line.endswith("\n") and first.isdigit() and int(first) <= step:
      keep.append(line)
  if not keep:
    os.unlink(path)
  elif keep != lines:
    atomic.write_text(path, "".join(keep))


def append_csv(path: str, row: dict) -> None:
  new = not os.path.exists(path)
  with open(path, "a", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(row))
    if new:
      writer.writeheader()
    writer.writerow(row)


class ScalarEvents:
  """TensorBoard scalars in an event file of `logdir`, each step's written and synced before
  the checkpoint that covers it; on resume from `resume_step` (0 too, where `logdir` holds
  events already), a START session log there makes TensorBoard drop what a killed run logged
  past the checkpoint (`purge=False`: none, for figures a rerun logs again unchanged).

  Not tensorboardX's SummaryWriter: it hands events to a background thread whose queue its
  flush() does not wait for (a kill right after a step lost that step's events though
  metrics.csv kept the row), and it names files by the second, so a rerun within the same
  second replaced the killed run's file. The event file format is still tensorboardX's."""

  def __init__(self, logdir: str, resume_step: int, purge: bool = True):
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event, SessionLog
    os.makedirs(logdir, exist_ok=True)
    earlier = bool(os.listdir(logdir))  # A killed run's events past `resume_step` go too.
    self._event = Event
    # Named so that files of one second sort in the order they were opened (TensorBoard reads
    # them by name: a later file's START must come after what it purges).
    self._writer = EventsWriter(os.path.join(logdir, "events"),
                                f".{time.time_ns():020d}.{os.getpid()}.{os.urandom(4).hex()}")
    if purge and (resume_step or earlier):
      self._writer.write_event(Event(wall_time=time.time(), step=resume_step + 1,
                                     session_log=SessionLog(status=SessionLog.START)))
    self._writer.flush()

  def add(self, values: dict[str, float], step: int) -> None:
    from tensorboardX.proto.summary_pb2 import Summary
    summary = Summary(value=[Summary.Value(tag=name, simple_value=float(value))
                             for name, value in values.items()])
    self._writer.write_event(self._event(wall_time=time.time(), step=step, summary=summary))
    self._writer.flush()  # Flushed and fsynced.

  def close(self) -> None:
    self._writer.close()


# What a config's fingerprint leaves out: the reward settings and what shapes only the
# policy's training (the per-graph caches do not depend on them).
_REWARD_SETTINGS = ("reward", "finetune_from", "standin_seconds", "measure_repeats")
_POLICY_ONLY = ("imitation_steps", "imitation_learning_rate", "learning_rate", "clip_norm",
                "entropy_weight", "normalize_advantage", "samples_per_graph", "batch_size",
                "policy", "seed")


def fingerprint(config: ml_collections.ConfigDict, ignore: tuple[str, ...] = ()) -> str:
  """What a checkpoint must match to be resumed: every setting but the run-length ones (and
  `ignore`), with the BRKGA preset's values, so that re-tuning it invalidates the workdir."""
  # The learner's choice and the prior learner's settings: train_lib trains mutants only.
  relevant = {k: v for k, v in config.to_dict().items()
              if k not in ("num_steps", "eval_every", "log_every", "num_actors", "learner",
                           "prior") + ignore}
  if "brkga_preset" in relevant:
    relevant["brkga_setting"] = brkga_presets.setting(relevant["brkga_preset"])
  return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def cache_fingerprint(config: ml_collections.ConfigDict) -> str:
  """What the per-graph caches (features, uniform objectives, test filter) depend on: not the
  reward settings, so a fine-tuning run reuses its source workdir's caches."""
  return fingerprint(config, _REWARD_SETTINGS + _POLICY_ONLY)
