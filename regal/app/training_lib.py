"""`regal.optimize` on a training step (issue 83): the mesh plan and every configuration.

  python -m regal.optimize --graph g.json --devices 8 --device_preset h100 --shard auto
  python -m regal.optimize --graph g.json --devices 8 --device_preset h100 --method fsdp

A graph made by `regal_datasets.zoo --step train` (or `train_step`) on accelerators is planned
as engineers parallelise a step, not op by op: `--shard auto` (or `--method auto`) searches
every data x tensor x pipeline mesh, ZeRO stage and micro-batch count
(`regal.parallelism.configurations`' `auto`); `--method` names one configuration instead. A
zoo step is also traced with its blocks rematerialised, so that a mesh that does not fit may
recompute blocks (a configuration all of them, the search the fewest that fit). The result
holds the plan (its mesh, step time in ms, memory per device in GB by what it holds) and,
under `baselines`, every configuration's best mesh with its step time and `feasible` (with
what overflowed where it does not fit).
"""
from __future__ import annotations

import time
from typing import Any

from regal.app.registries import METHODS
from regal.parallelism.registries import CONFIGURATIONS
from regal_datasets import errors
from regal_datasets.graph import Graph

FLAGS_READ = ("graph", "format", "devices", "device_preset", "shard", "method", "out")


def is_training_step(graph: Graph | None) -> bool:
  return graph is not None and "training" in graph.metadata


def wanted(graph: Graph | None, method: str, shard: str, method_given: bool) -> bool:
  """Whether this run plans a training step's mesh: a training step with --shard auto or a
  configuration's --method; a configuration's --method on anything else is refused."""
  configuration = method_given and method in CONFIGURATIONS
  if not is_training_step(graph):
    if configuration and method not in METHODS:  # Some are placement methods too.
      raise errors.ConfigError(
          f"--method {method} plans a training step's mesh: give a graph made with "
          f"regal_datasets.zoo --step train (or regal_datasets.train_step)")
    return False
  return shard == "auto" or configuration


def check(kinds: tuple[str, ...], shard: str, method: str, method_given: bool,
          given: list[str]) -> str:
  """The configuration to run, once the flags are checked: `auto` for --shard auto."""
  from regal.parallelism import collectives, roofline
  if not kinds or len(set(kinds)) != 1:
    raise errors.ConfigError("a training step is planned on accelerators of one kind: give "
                             "--device_preset (h100, a100, v100 or tpu_v5e)")
  kind = kinds[0]
  if kind not in collectives.FABRICS or kind not in roofline.KERNEL_COSTS:
    raise errors.ConfigError(f"--device_preset {kind}: no fabric for a training step on it; "
                             f"known: {', '.join(collectives.FABRICS)}")
  if shard not in ("off", "auto"):
    raise errors.ConfigError(f"--shard {shard}: a training step's mesh is searched "
                             f"(--shard auto) or named (--method), not given a shard count")
  for name in given:
    if name not in FLAGS_READ:
      raise errors.ConfigError(f"--{name} would do nothing here: a training step's mesh plan "
                               f"reads only {', '.join('--' + f for f in FLAGS_READ)}")
  if method_given and shard == "auto":
    raise errors.ConfigError(f"give --shard auto (the search) or --method {method} (one "
                             f"configuration), not both")
  return method if method_given else "auto"


def run(graph: Graph, num_devices: int, kind: str, configuration: str,
        source: str | None = None) -> dict[str, Any]:
  """The result: the configuration's plan and every baseline configuration's answer."""
  from regal.parallelism import configurations, profile
  started = time.perf_counter()
  plain = _plain(graph)  # A zoo step is priced both ways: blocks held, and recomputed.
  step = profile.profile(plain if plain is not None else graph, kind)
  recomputing = (profile.profile(_rematerialised(plain), kind) if plain is not None
                 else None)
  answers = {name: configurations.best(step, num_devices, name, recomputing=recomputing)
             for name in (*configurations.BASELINES, "auto")}
  chosen = answers.get(configuration) or configurations.best(step, num_devices, configuration,
                                                             recomputing=recomputing)
  if chosen is None:
    raise errors.ConfigError(f"--method {configuration} has no mesh for {num_devices} devices "
                             f"and batch {step.batch}")
  baselines = {name: (answer.to_json() if answer is not None else
                      {"feasible": False, "overflow": "no mesh of this configuration fits "
                                                      "the device count and batch"})
               for name, answer in answers.items() if name in configurations.BASELINES}
  return {
      "graph": step.graph_name, "source": source, "kind": kind, "devices": num_devices,
      "recomputation": ("searched: any number of blocks" if recomputing is not None else
                        "not priced: the graph is not the zoo's, which could retrace it"),
      "method": configuration, "objective": "step_ms", "batch": step.batch,
      "parameters": step.training.get("parameters"),
      "plan": chosen.to_json(), "feasible": chosen.feasible, "baselines": baselines,
      "wall_seconds": time.perf_counter() - started,
  }


def _plain(graph: Graph) -> Graph | None:
  """The zoo step `graph` is, traced without rematerialisation; None for another graph."""
  from regal_datasets import zoo
  made = zoo.how_made(graph)
  if made is None or made.get("step") != "train" or not zoo.SPECS[made["model"]].layers:
    return None
  return graph if not made.get("remat") else zoo.model_graph(**{**made, "remat": False})


def _rematerialised(graph: Graph) -> Graph:
  from regal_datasets import zoo
  return zoo.model_graph(**{**zoo.how_made(graph), "remat": True})


def summary(result: dict[str, Any]) -> str:
  plan = result["plan"]
  lines = [f"{result['graph']}: training step, {result['devices']} x {result['kind']}, "
           f"{result['method']}: {plan['mesh']['name']}: {plan['step_ms']:.1f} ms, "
           f"{plan['memory_per_device_gb']:.1f} GB per device"
           + ("" if plan["feasible"] else f" (does not fit: {plan['overflow']})")]
  width = max([32] + [len(a["mesh"]["name"]) for a in result["baselines"].values()
                       if "mesh" in a])
  for name, answer in result["baselines"].items():
    if "mesh" not in answer:
      lines.append(f"  {name:16s} no mesh")
      continue
    state = "fits" if answer["feasible"] else "does not fit"
    lines.append(f"  {name:16s} {answer['mesh']['name']:{width}s} {answer['step_ms']:9.1f} ms "
                 f"{answer['memory_per_device_gb']:7.1f} GB  {state}")
    if not answer["feasible"]:
      lines.append(f"    {answer['overflow']}")
  feasible = [a["step_ms"] for a in result["baselines"].values() if a.get("feasible")]
  if plan["feasible"] and feasible:
    best = min(feasible)
    lines.append(f"verdict: fits; {best / plan['step_ms']:.2f}x the speed of the best "
                 f"configuration that fits ({best:.1f} ms)")
  elif not plan["feasible"]:
    lines.append("verdict: does not fit; " + plan["overflow"])
  return "\n".join(lines)
