"""Executor checks that need several devices: run as a script (4 host devices are set before
JAX starts, which the test process itself cannot do), writing one JSON of facts that
`execute_test.py` asserts on. Every numeric comparison is computed here against an
independent reference (one device, dense numpy, the function called directly)."""
import json
import sys

import jax

jax.config.update("jax_num_cpu_devices", 4)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from regal_datasets import jax_import, sharded, synthetic  # noqa: E402
from regal.execute import calibrate_lib, choose_program, executor  # noqa: E402
from regal.execute import jax_program as jax_program_lib  # noqa: E402
from regal.execute.measured import MeasuredReward  # noqa: E402

GRAPHS = {
    "chain_mm": dict(size=48),
    "ffnn": dict(ffnn_batch=64, ffnn_width=96),
    "llama_block": dict(seq_len=8, hidden=16, heads=2, mlp=16),
}


def assemble_matrix(graph, values: dict[int, np.ndarray], tensors) -> np.ndarray:
  """The logical matrix that `tensors` (the blocks of one input or elementwise meta-op) tile,
  from their values: how a sharded result is read back as one array."""
  semantics = graph.metadata["semantics"]
  producer = graph.tensor_producer
  regions = [semantics[int(producer[t])]["region"] for t in tensors]
  rows = max(r[1] for r in regions)
  cols = max(r[3] for r in regions)
  out = np.zeros((rows, cols), np.float32)
  for t, (r0, r1, c0, c1) in zip(tensors, regions):
    out[r0:r1, c0:c1] = np.asarray(values[t]).reshape(r1 - r0, c1 - c0)
  return out


def matrix(graph, values, meta):
  tensors = [int(np.flatnonzero(graph.tensor_producer == op)[0])
             for op, m in enumerate(graph.metadata["meta_op"]) if m == meta]
  return assemble_matrix(graph, values, tensors).astype(np.float64)


def dense_reference(workload, graph, program):
  values = {int(np.flatnonzero(graph.tensor_producer == op)[0]): kernel.value[0]
            for op, kernel in enumerate(program.kernels) if kernel.is_source}
  if workload == "chain_mm":
    a, b, c, d, e = (matrix(graph, values, name) for name in "ABCDE")
    return a @ b + c @ (d @ e)
  if workload == "ffnn":
    x, w1, b1, w2, b2 = (matrix(graph, values, name) for name in ("X", "W1", "b1", "W2", "b2"))
    z = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)
  return None


def sharded_facts(rng):
  facts = {}
  devices = jax.devices()
  for workload, sizes in GRAPHS.items():
    graph = sharded.generate(workload, 4, **sizes)
    program = choose_program.program_for(graph)
    one = executor.execute(graph, program, np.zeros(graph.num_ops, int), devices=devices,
                           repeats=1)
    spread = np.arange(graph.num_ops) % 4
    runs = {"spread": (spread, executor.execute(graph, program, spread, devices=devices,
                                                repeats=2))}
    for k in range(3):
      placement = rng.integers(0, 4, graph.num_ops)
      runs[f"random{k}"] = (placement, executor.execute(
          graph, program, placement, rng.permutation(graph.num_ops), devices,
          mode="strict" if k == 2 else "async", repeats=1))
    result = {"ops": graph.num_ops, "one_device_seconds": one.median,
              "spread_seconds": runs["spread"][1].median, "placements": {}}
    for name, (placement, run) in runs.items():
      result["placements"][name] = {
          "max_abs_difference": max(float(np.abs(run.outputs[t] - one.outputs[t]).max())
                                    for t in program.outputs),
          "ops_on_named_device": bool((run.op_devices == placement).all()),
          "devices_used": int(len(np.unique(run.op_devices)))}
    reference = dense_reference(workload, graph, program)
    if reference is not None:
      out = assemble_matrix(graph, one.outputs, list(program.outputs))
      result["dense_max_abs_error"] = float(np.abs(out - reference).max())
      result["dense_scale"] = float(np.abs(reference).max())
    facts[workload] = result
  return facts


def jax_facts(rng):
  def mlp(params, x):
    for w, b in params:
      x = jnp.tanh(x @ w + b)
    return jax.nn.softmax(x, axis=-1), jnp.sum(x)

  shapes = ([(jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16,), jnp.float32)),
             (jax.ShapeDtypeStruct((16, 4), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.float32))],
            jax.ShapeDtypeStruct((5, 8), jnp.float32))
  traced = jax_import.trace(mlp, *shapes)
  program = jax_program_lib.jax_program(traced)
  leaves = jax_program_lib.input_values(traced)
  args = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), leaves)
  expected = jax.tree_util.tree_leaves(mlp(*args))
  placement = rng.integers(0, 4, traced.graph.num_ops)
  run = executor.execute(traced.graph, program, placement, repeats=1)
  got = [run.outputs[t] for t in program.outputs]
  return {"ops": traced.graph.num_ops,
          "max_abs_difference": max(float(np.abs(np.asarray(e) - g).max())
                                    for e, g in zip(expected, got)),
          "ops_on_named_device": bool((run.op_devices == placement).all())}


def standin_facts(rng):
  graph = synthetic.generate(np.random.default_rng(3),
                             synthetic.SyntheticSpec(min_nodes=24, max_nodes=24))
  program = choose_program.program_for(graph, standin_seconds=0.05)
  placement = rng.integers(0, 4, graph.num_ops)
  run = executor.execute(graph, program, placement, repeats=2)
  one = executor.execute(graph, program, np.zeros(graph.num_ops, int), repeats=2)
  return {"kind": program.kind, "ops": graph.num_ops, "seconds": run.median,
          "one_device_seconds": one.median,
          "ops_on_named_device": bool((run.op_devices == placement).all())}


def calibration_facts():
  graph = sharded.generate("chain_mm", 2, size=64)
  program = choose_program.program_for(graph)
  devices = jax.devices()[:2]
  fit = calibrate_lib.calibrate(graph, program, devices, repeats=2)
  report = calibrate_lib.prediction_report(graph, program, fit.spec, devices, placements=5,
                                         repeats=1)
  return {"speed": fit.spec.speed.tolist(), "latency": fit.spec.latency.tolist(),
          "bandwidth": np.where(np.isinf(fit.spec.bandwidth), -1,
                                fit.spec.bandwidth).tolist(),
          "pearson": report["pearson"], "spearman": report["spearman"],
          "rows": len(report["rows"]),
          "op_samples": [[s["device"], s["cost"], s["seconds"]] for s in fit.op_samples],
          "link_samples": [[s["src"], s["dst"], s["bytes"], s["seconds"]]
                           for s in fit.link_samples]}


def measured_facts(rng):
  graph = sharded.generate("ffnn", 4, ffnn_batch=32, ffnn_width=32)
  reward = MeasuredReward(graph, choose_program.program_for(graph), jax.devices(), repeats=1)
  placements = rng.integers(0, 4, (3, graph.num_ops))
  orders = np.stack([rng.permutation(graph.num_ops) for _ in range(3)])
  first = reward(placements, orders)
  again = reward(placements[::-1], orders[::-1])
  return {"first": first.tolist(), "again": again.tolist(), "executions": reward.executions,
          "evaluations": reward.evaluations}


def main(path):
  rng = np.random.default_rng(0)
  facts = {"num_devices": len(jax.devices()), "sharded": sharded_facts(rng),
           "jax": jax_facts(rng), "standin": standin_facts(rng),
           "calibration": calibration_facts(), "measured": measured_facts(rng)}
  with open(path, "w") as f:
    json.dump(facts, f, indent=1)


if __name__ == "__main__":
  main(sys.argv[1])
