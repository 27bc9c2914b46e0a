"""Device-set descriptions: presets, JSON, flags and bad values."""
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal.parallelism import hardware
from regal_datasets import analysis, devices, errors


def test_homogeneous_transfer_and_compute_times():
  spec = devices.homogeneous(3, latency=2.0, bandwidth=4.0)
  assert spec.num_devices == 3 and np.isinf(spec.memory_capacity).all()
  assert analysis.transfer_time(spec, 8.0, 0, 1) == 2.0 + 8.0 / 4.0
  assert analysis.transfer_time(spec, 8.0, 2, 2) == 0.0
  assert spec.compute_time(6.0, 1) == 6.0
  np.testing.assert_array_equal(analysis.transfer_time(spec, np.array([4.0, 4.0]), [0, 1], [1, 1]),
                                [3.0, 0.0])


def test_nvlink_two_groups_links_are_slower_across_groups():
  spec = devices.nvlink_two_groups(group_size=4, inter_bandwidth=0.25)
  assert spec.num_devices == 8
  assert analysis.transfer_time(spec, 1.0, 0, 3) == 1.0
  assert analysis.transfer_time(spec, 1.0, 3, 4) == 4.0
  assert analysis.transfer_time(spec, 1.0, 7, 4) == 1.0


def test_json_round_trip_and_file(tmp_path):
  spec = devices.DeviceSpec(memory_capacity=[16.0, math.inf], speed=[1.0, 2.0],
                            bandwidth=[[0, 3.0], [5.0, 0]], latency=[[0, 1.0], [2.0, 0]],
                            name="mixed")
  assert devices.from_json_dict(json.loads(json.dumps(spec.to_json_dict()))) == spec
  path = tmp_path / "devices.json"
  devices.save(spec, str(path))
  assert devices.resolve(spec_path=str(path)) == spec
  short = devices.from_json_dict({"num_devices": 2, "speed": 2.0, "memory_capacity": 8})
  assert short.speed.tolist() == [2.0, 2.0] and short.memory_capacity.tolist() == [8.0, 8.0]


def test_resolve_presets():
  assert devices.resolve().num_devices == 2
  assert devices.resolve(num_devices=5).num_devices == 5
  assert devices.resolve(preset="nvlink_two_groups").num_devices == 8
  assert devices.resolve(num_devices=4, preset="nvlink_two_groups").num_devices == 4


@pytest.mark.parametrize("call, message", [
    (lambda: devices.homogeneous(0), "device count must be an integer >= 1, got 0"),
    (lambda: devices.resolve(num_devices=-2), "device count must be an integer >= 1, got -2"),
    (lambda: devices.from_json_dict({"num_devices": 0}), "device count must be an integer >= 1"),
    (lambda: devices.from_json_dict({"num_devices": 2, "speed": [1.0, 0.0]}),
     "speed[1] = 0.0 is invalid"),
    (lambda: devices.from_json_dict({"num_devices": 2, "speed": [1.0, 1.0, 1.0]}),
     "speed has shape (3,), expected (2,)"),
    (lambda: devices.from_json_dict({"num_devices": 2, "latency": -1}),
     "latency[0, 1] = -1.0 is invalid"),
    (lambda: devices.from_json_dict({"num_devices": 2, "bandwidth": float("nan")}),
     "bandwidth[0, 1] = nan is invalid"),
    (lambda: devices.from_json_dict({"num_devices": 2, "memory_capacity": [1, -1]}),
     "memory_capacity[1] = -1.0 is invalid"),
    (lambda: devices.from_json_dict({"num_devices": 2, "colour": "red"}),
     "unknown keys ['colour']"),
    (lambda: devices.from_json_dict([1, 2]), "device spec JSON must be an object"),
    (lambda: devices.resolve(preset="tpu_pod"), "unknown device preset 'tpu_pod'"),
    (lambda: devices.resolve(num_devices=3, preset="nvlink_two_groups"),
     "needs an even device count"),
])
def test_bad_device_specs(call, message):
  with pytest.raises(errors.DeviceSpecError, match=re.escape(message)):
    call()


def test_bad_json_file(tmp_path):
  path = tmp_path / "d.json"
  path.write_text("{oops")
  with pytest.raises(errors.DeviceSpecError, match="not valid JSON"):
    devices.load(str(path))


def test_flags(tmp_path):
  from absl import flags
  values = flags.FlagValues()
  hardware.define_flags(values)
  values(["prog", "--devices=3"])
  assert hardware.from_flags(values).num_devices == 3
  path = tmp_path / "d.json"
  path.write_text(json.dumps({"num_devices": 2, "speed": [1, 3]}))
  values(["prog", f"--device_spec={path}"])
  assert hardware.from_flags(values).speed.tolist() == [1.0, 3.0]
  values(["prog", "--device_spec=", "--devices=0"])
  with pytest.raises(errors.DeviceSpecError, match="got 0"):
    hardware.from_flags(values)


def _groups_by_closure(bandwidth, latency):
  """Readable reference of `link_groups`: two devices share a group when a chain of fastest
  links (highest bandwidth, then lowest latency, between distinct devices) joins them."""
  num = len(bandwidth)
  pairs = [(i, j) for i in range(num) for j in range(num) if i != j]
  top = max(bandwidth[i][j] for i, j in pairs)
  low = min(latency[i][j] for i, j in pairs if bandwidth[i][j] == top)
  linked = [[i == j or (bandwidth[i][j] == top and latency[i][j] == low) or
             (bandwidth[j][i] == top and latency[j][i] == low) for j in range(num)]
            for i in range(num)]
  for via in range(num):  # Warshall's transitive closure.
    for i in range(num):
      for j in range(num):
        linked[i][j] = linked[i][j] or (linked[i][via] and linked[via][j])
  labels, out = {}, []
  for i in range(num):
    first = min(j for j in range(num) if linked[i][j])
    out.append(labels.setdefault(first, len(labels)))
  return out


def test_link_groups_of_the_presets():
  assert devices.link_groups(devices.homogeneous(4)).tolist() == [0, 0, 0, 0]
  assert devices.link_groups(devices.homogeneous(1)).tolist() == [0]
  assert devices.link_groups(devices.nvlink_two_groups(3)).tolist() == [0, 0, 0, 1, 1, 1]
  # Equal bandwidth everywhere, but two pairs have no latency: those pairs are the groups.
  latency = np.ones((4, 4))
  latency[0, 2] = latency[2, 0] = latency[1, 3] = latency[3, 1] = 0.0
  spec = devices.DeviceSpec(memory_capacity=np.inf, speed=np.ones(4), bandwidth=1.0,
                            latency=latency, name="pairs")
  assert devices.link_groups(spec).tolist() == [0, 1, 0, 1]


@given(st.integers(2, 6).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.sampled_from([1.0, 2.0]), min_size=n, max_size=n), min_size=n,
             max_size=n),
    st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n), min_size=n,
             max_size=n))))
@settings(max_examples=150, deadline=None)
def test_link_groups_match_the_transitive_closure_of_the_fastest_links(links):
  bandwidth, latency = links
  spec = devices.DeviceSpec(memory_capacity=np.inf, speed=np.ones(len(bandwidth)),
                            bandwidth=bandwidth, latency=latency, name="random")
  expected = _groups_by_closure(spec.bandwidth.tolist(), spec.latency.tolist())
  assert devices.link_groups(spec).tolist() == expected
