"""regal.optimize: results that re-score exactly, beat one device, and bad input refused."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_test import assert_one_line_error, run

from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets import jax_import
from regal_datasets.graph import GraphBuilder
from regal_datasets.synthetic import sized_graph
from regal import baselines, search
from regal.app import methods, optimize_lib
from regal.app import report as report_lib
from regal.scoring import performance
from regal.scoring.doppler import reference as doppler_sim

S = jax.ShapeDtypeStruct


# Two of the four files: the golden test searches the others (chain_mm on wc, ffnn on doppler).
@pytest.mark.parametrize("file_name", ["transformer_block_215nodes.txt",
                                       "full_transformer_layer_261nodes.txt"])
def test_doppler_graphs_rescore_and_beat_one_device(shared_graphs, file_name, tmp_path):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / file_name))
  devices = devices_lib.homogeneous(4)
  report = optimize_lib.run(graph, devices, methods.RunConfig(model="doppler", evals=2000, seed=0))
  out = tmp_path / "result.json"
  report_lib.write_json(report, str(out))
  data = json.loads(out.read_text())
  placement = np.array([entry["device"] for entry in data["placement"]])
  assert [entry["name"] for entry in data["placement"]] == list(graph.op_names)
  rescored = doppler_sim.simulate_doppler(graph, devices, placement)
  assert rescored.makespan == data["makespan"] == data["objective"]
  assert data["makespan"] < graph.compute_cost.sum() == data["baselines"]["single_device"][
      "makespan"]
  assert data["evaluations"] <= 2000 and data["settings"]["search_model"] == "doppler"
  assert data["settings"]["engine"] == "native"
  # People read Doppler's units (the clock / 1e10: "166.72"), not the clock (1.6672e+12).
  assert data["time_units"] == {"scale": 1e-10, "name": "Doppler units", "note": ""}
  text = report_lib.summary(report)
  assert f"objective {data['objective'] * 1e-10:.6g}  makespan" in text
  # The JSON carries what the summary prints, beside the raw figure.
  assert f"objective {data['display']['objective']:.6g}  makespan" in text
  assert "times in Doppler units" in text and f"{data['objective']:.6g}" not in text
  assert "peak memory not tracked by the doppler model" in text


def write_pair_graph(folder):
  """a and b (cost 5) feed c (cost 1) through 1-byte tensors: on 2 devices the optimum is 7."""
  graph_file = folder / "g.json"
  graph_file.write_text(json.dumps({
      "format": "regal.graph", "version": 1, "name": "pair",
      "ops": [{"name": "a", "compute_cost": 5}, {"name": "b", "compute_cost": 5},
              {"name": "c", "compute_cost": 1}],
      "tensors": [{"producer": "a", "size": 1}, {"producer": "b", "size": 1}],
      "data_edges": [{"tensor": 0, "consumer": "c"}, {"tensor": 1, "consumer": "c"}]}))
  return graph_file


def test_cli_writes_result(tmp_path):
  graph_file = write_pair_graph(tmp_path)
  out = tmp_path / "result.json"
  result = run("regal.optimize", "--graph", str(graph_file), "--devices", "2", "--evals", "300",
               "--out", str(out))
  assert result.returncode == 0, result.stderr
  assert "improvement" in result.stdout
  data = json.loads(out.read_text())
  assert data["format"] == "regal.result" and data["makespan"] == 7  # a || b, send 1, c 1.
  assert {t["dst"] for t in data["transfers"]} <= {0, 1}


@pytest.mark.parametrize("method", ["critical_path", "cpsat"])
def test_cli_runs_a_baseline(tmp_path, method):
  graph_file = write_pair_graph(tmp_path)
  out = tmp_path / "result.json"
  limit = ["--time_limit", "5"] if method == "cpsat" else []  # critical_path would ignore it.
  result = run("regal.optimize", "--graph", str(graph_file), "--devices", "2", "--method",
               method, *limit, "--out", str(out))
  assert result.returncode == 0, result.stderr
  data = json.loads(out.read_text())
  assert data["settings"]["method"] == data["chosen"] == method
  assert data["makespan"] == 7  # Optimal: a || b, send 1, c 1.
  if method == "cpsat":
    assert data["details"]["status"] == "OPTIMAL" and data["details"]["lower_bound"] == 7


def test_the_summary_says_above_or_below_one_way():
  assert report_lib.versus(98.0, 100.0) == "2.00% below"
  assert report_lib.versus(101.0, 100.0) == "1.00% above"
  assert report_lib.versus(5.0, 5.0) == "equal to"


def _fork(tensor_size: float):
  """a feeds b and c (cost 10 each), which feed d: two devices can halve the middle."""
  builder = GraphBuilder("fork")
  for name, cost in (("a", 1.0), ("b", 10.0), ("c", 10.0), ("d", 1.0)):
    builder.add_op(name, cost)
  for src, dst in (("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")):
    builder.add_data_edge(builder.add_tensor(src, tensor_size), dst)
  return builder.build()


def test_a_result_that_beats_one_device_by_little_says_why():
  two = devices_lib.homogeneous(2)
  chain = sized_graph(1, seed=0)  # Source, one op, sink: nothing runs beside anything.
  report = optimize_lib.run(chain, two, methods.RunConfig(method="heft"))
  assert "longest dependency chain holds 100% of the compute" in report.result.why_no_gain
  assert "no gain:" in report_lib.summary(report)
  costly = optimize_lib.run(_fork(1e6), two,
                            methods.RunConfig(method="heft"))  # Transfers dwarf the compute.
  assert costly.result.improvement_pct < 1
  assert costly.result.why_no_gain.startswith("transfers cost more than they save")
  cheap = optimize_lib.run(_fork(0.1), two, methods.RunConfig(method="heft"))
  assert cheap.result.improvement_pct > 30 and cheap.result.why_no_gain is None
  assert "no gain:" not in report_lib.summary(cheap)


def _two_heavy_chains(length: int):
  """Two independent chains whose tensors cost far more to send than any op to run: the
  list schedulers put one chain on each device (half of one device's time); a random
  placement crosses devices ~length times, and moving one op at a time from one device
  only makes it worse until a whole chain has moved."""
  builder = GraphBuilder("two_heavy_chains")
  for chain in "ab":
    for op in range(length):
      builder.add_op(f"{chain}{op}", 1.0 + op % 3)
    for op in range(length - 1):
      builder.add_data_edge(builder.add_tensor(f"{chain}{op}", 1e4), f"{chain}{op + 1}")
  return builder.build()


def test_brkga_result_never_loses_a_seed_and_seeds_every_cheap_heuristic():
  graph = _two_heavy_chains(20)  # Without the heuristics' seeds 300 tries stay on one device.
  report = optimize_lib.run(graph, devices_lib.homogeneous(2),
                            methods.RunConfig(model="sync", evals=300))
  seeds = report.result.baselines["best_seed"]
  # The search itself keeps its seeds (they are in its first population and elites survive),
  # not only the final choice, which takes the best of the answer and the seeds anyway.
  assert report.result.search_objective <= seeds["objective"]
  assert report.result.objective == min(report.result.search_objective, seeds["objective"])
  assert set(report.result.details["seed_arms"]) == set(methods.DEFAULT_ARMS) == {
      "single_device", "critical_path", "critical_path_doppler", "heft", "gp_dfs"}
  assert seeds["objective"] == min(report.result.details["seed_arms"].values())
  text = report_lib.summary(report)
  assert f"(the {seeds['name']} seed on its own)" in text
  origin = report.result.details["winner_origin"]
  assert (f"evolved from the {origin} seed" if origin else "descends from no seed") in text


def test_coarsened_search_maps_back_to_the_original_graph(tmp_path):
  out = tmp_path / "result.json"
  graph_file = tmp_path / "mlp.json"
  graph_io.save_graph(jax_import.trace_graph(
      lambda w, x: jax.nn.softmax(jnp.tanh(x @ w[0]) @ w[1]),
      [S((64, 256), jnp.float32), S((256, 64), jnp.float32)], S((32, 64), jnp.float32)),
      str(graph_file))
  result = run("regal.optimize", "--graph", str(graph_file), "--devices", "2", "--coarsen", "4",
               "--method", "critical_path", "--out", str(out))
  assert result.returncode == 0, result.stderr
  data = json.loads(out.read_text())
  graph = graph_io.load_graph(str(graph_file))
  assert data["details"]["coarsening"]["coarse_ops"] <= 4 < graph.num_ops
  assert len(data["placement"]) == graph.num_ops
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  order = [graph.op_names.index(name) for name in data["schedule"]]
  placement = [entry["device"] for entry in data["placement"]]
  assert baselines.score(problem, placement, order)[0] == data["objective"]
  coarse = data["details"]["coarsening"]
  assert coarse["coarse_tensors"] >= 1 and np.isfinite(coarse["coarse_objective"])
  assert f"{graph.num_ops} ops to {coarse['coarse_ops']} groups" in result.stdout
  assert "refinement" not in coarse  # The named method's answer, expanded as it is.


def test_a_coarsened_search_is_refined_on_the_original_graph():
  """Groups run whole on the group graph, so its answers idle where their members need not:
  the climb on the original graph starts from the best expanded candidate, ends better, and
  its answer is the search's, re-scored exactly; past the time limit it makes no move."""
  graph = sized_graph(60, topology="barabasi_albert")
  devices = devices_lib.homogeneous(4)
  problem = performance.Problem(graph, devices)
  report = optimize_lib.run(graph, devices, methods.RunConfig(
      evals=500, setup=methods.Setup(coarsen="6")))
  data = report.result
  refinement = data.details["coarsening"]["refinement"]
  order = [graph.op_names.index(name) for name in data.schedule]
  placement = [entry["device"] for entry in data.placement]
  assert baselines.score(problem, placement, order)[0] == data.objective
  assert data.objective == data.search_objective == refinement["objective"]
  assert refinement["start_objective"] == min(data.baselines["best_seed"]["objective"],
                                              refinement["expanded_objective"])
  assert refinement["objective"] < refinement["start_objective"]
  assert refinement["evaluations"] == refinement["budget"] == search.refine_evals(problem)
  assert data.evaluations > refinement["evaluations"]
  assert f"to {refinement['objective']:.6g} in {refinement['evaluations']} evaluations" in (
      report_lib.summary(report))
  timed = optimize_lib.run(graph, devices,
                           methods.RunConfig(evals=500, time_limit=1e-6,
                                             setup=methods.Setup(coarsen="6")))
  stopped = timed.result.details["coarsening"]["refinement"]
  # Every candidate scored once: the search's answer and one seed per arm.
  assert stopped["evaluations"] == 1 + len(timed.result.details["seed_arms"])
  assert stopped["objective"] == stopped["start_objective"] == timed.result.objective


def test_many_graphs_per_call_keep_going_past_a_broken_file(tmp_path, shared_graphs):
  sinnen = sorted((shared_graphs / "sinnen").glob("*_Nodes_10_*Homogeneous-4.dot"))[:2]
  first, second = tmp_path / "first.dot", tmp_path / "second.dot"
  first.write_text(sinnen[0].read_text())
  second.write_text(sinnen[1].read_text())
  broken = tmp_path / "broken.dot"
  broken.write_text("digraph { a [Weight=1]; b; }")
  out_dir = tmp_path / "results"
  result = run("regal.optimize", "--graph", f"{first},{broken},{second}", "--model", "delay",
               "--devices", "4", "--evals", "800", "--out_dir", str(out_dir), "--gantt", "png")
  assert result.returncode == 2
  errors_printed = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors_printed) == 2 and "task 'b' has no Weight" in errors_printed[0]
  assert "1 of 3 graphs failed" in errors_printed[1] and "Traceback" not in result.stderr
  assert sorted(p.name for p in out_dir.iterdir()) == ["first.json", "first.png",
                                                       "second.json", "second.png"]
  lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
  assert len(lines) == 2 and "2 of 3 graphs optimized (2 proven optimal), 1 failed" in result.stdout
  for name, source in (("first", sinnen[0]), ("second", sinnen[1])):
    data = json.loads((out_dir / f"{name}.json").read_text())
    graph = graph_io.load_graph(str(source))
    problem = performance.Problem(graph, devices_lib.homogeneous(4), model="delay")
    placement = np.array([entry["device"] for entry in data["placement"]])
    order = np.array([graph.op_names.index(name) for name in data["schedule"]])
    assert baselines.score(problem, placement, order)[0] == data["objective"]
    assert data["search_objective"] >= data["objective"]


def test_out_dir_without_graph_files_is_refused(tmp_path):
  """The default graph (or --dataset) gives one result: --out_dir would save nothing."""
  assert_one_line_error(run("regal.optimize", "--out_dir", str(tmp_path)),
                        "--out_dir keeps the results of --graph files")
  assert not list(tmp_path.iterdir())


def test_many_graphs_refuse_outputs_over_inputs_and_one_out(tmp_path, shared_graphs):
  source = sorted((shared_graphs / "sinnen").glob("*.dot"))[0]
  graph_file = tmp_path / "g.dot"
  graph_file.write_text(source.read_text())
  (tmp_path / "g.json").write_text(source.read_text())  # Same stem, other format.
  assert_one_line_error(run("regal.optimize", "--graph", str(tmp_path), "--model", "delay",
                            "--out_dir", str(tmp_path)), "would both write g.json")
  other = tmp_path / "h.dot"
  other.write_text(source.read_text())
  assert_one_line_error(run("regal.optimize", "--graph", f"{graph_file},{other}", "--out",
                            str(tmp_path / "r.json")), "give --out_dir")


def test_bucketed_search_compiles_once_per_bucket(shared_graphs):
  from regal import search
  files = sorted((shared_graphs / "sinnen").glob("*_Nodes_10_*Homogeneous-2.dot"))[:3]
  problems = [performance.Problem(graph_io.load_graph(str(f)), devices_lib.homogeneous(2),
                                  model="delay") for f in files]
  assert len({performance.bucket_layout(p) for p in problems}) == 1
  results = [search.optimize(performance.Evaluator.of(p), evals=400, seed=0) for p in problems]
  assert all(r.compile_seconds == 0 for r in results[1:])
  for problem, result in zip(problems, results):
    assert result.history[-1] == np.float32(performance.score_reference(
        problem, result.best_chromosome)[0])


def test_many_graphs_check_each_graphs_device_count(tmp_path, capsys):
  """As one graph does: three devices for a two-op graph is that graph's one-line error."""
  write_pair_graph(tmp_path)  # Three ops.
  graph_io.save_graph(sized_graph(0, seed=0), str(tmp_path / "two.json"))  # Source and sink.
  failures = optimize_lib.run_many(
      [str(tmp_path / "g.json"), str(tmp_path / "two.json")], devices_lib.homogeneous(3),
      methods.RunConfig(method="heft"))
  assert failures == 1
  assert "at most 2 devices can be used" in capsys.readouterr().err


def _chain_and_a_speck(speck: float):
  """Ten ops of 10 in a chain, and one independent op of `speck`: a second device gains at
  most `speck` / 100 of the makespan."""
  from regal_datasets.graph import GraphBuilder
  builder = GraphBuilder("chain_and_a_speck")
  for i in range(10):
    builder.add_op(f"c{i}", 10.0)
    if i:
      builder.add_data_edge(builder.add_tensor(f"c{i - 1}", 1.0), f"c{i}")
  builder.add_op("speck", speck)
  return builder.build()


@pytest.mark.parametrize("speck, expect_one_device", [(1e-3, True), (5.0, False)])
def test_an_answer_no_better_than_one_device_stays_on_one_device(speck, expect_one_device):
  """The search moves the speck to the second device (1e-5 better): equal, to a user, to
  keeping everything on one, which is what comes back, with the reason; a speck of 5 (5%) is
  a real gain and stays spread."""
  from regal_datasets import devices as devices_lib
  from regal.app import methods, optimize_lib
  data = optimize_lib.run(_chain_and_a_speck(speck), devices_lib.homogeneous(2),
                          methods.RunConfig(evals=2000)).result
  used = {row["device"] for row in data.placement}
  simplest = data.simplest_among_equals
  if expect_one_device:
    assert used == {0} and data.chosen == "single_device"
    assert data.objective == data.baselines["single_device"]["objective"]
    assert simplest["devices_used"] == {"chosen": 1, "best": 2}
    assert simplest["objective"]["best"] < simplest["objective"]["chosen"] <= (
        simplest["objective"]["best"] * (1 + optimize_lib.SAME_OBJECTIVE))
  else:
    assert used == {0, 1} and simplest is None
    assert data.objective == pytest.approx(100.0)


def test_a_zoo_model_sharded_on_h100s_beats_one_device_and_data_parallelism(tmp_path):
  """Issue 70's command line, on a one-layer GPT-2 small enough for the suite: a step time
  in ms, a split chosen by measured benefit, and an objective no worse than
  `--method data_parallel` with the same flags; the plan names every op's shards."""
  graph_file = tmp_path / "gpt2.json"
  made = run("regal_datasets.zoo", "--model", "gpt2_small", "--batch", "8", "--seq_len", "64",
             "--layers", "1", "--out", str(graph_file))
  assert made.returncode == 0, made.stderr
  results = {}
  for method, extra in (("brkga", ["--shard", "auto", "--evals", "400"]),
                        ("data_parallel", [])):
    out = tmp_path / f"{method}.json"
    done = run("regal.optimize", "--graph", str(graph_file), "--devices", "4",
               "--device_preset", "h100", "--method", method, *extra, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "times in us" in done.stdout or "times in ms" in done.stdout
    assert "sharded:" in done.stdout and "H100" in done.stdout
    results[method] = json.loads(out.read_text())
  ours, data_parallel = results["brkga"], results["data_parallel"]
  assert ours["objective"] <= data_parallel["objective"] * (1 + 1e-6)
  # Splitting buys less than 1 - 1/4: each kernel's launch does not shrink with its work, and
  # each GPU's transfers to its peers take turns on its NVLink port.
  chosen = ours["sharding"]["chosen"]["shards"]
  assert ours["improvement_pct"] > 20 and chosen in (2, 4)
  assert data_parallel["sharding"]["candidates"] == [
      {k: v for k, v in row.items()} for row in data_parallel["sharding"]["candidates"]
      if row["strategy"] == "batch"]
  shards = [len(row["shards"]) for row in ours["sharding"]["plan"]]
  assert max(shards) == chosen and len(ours["sharding"]["resident_parameter_bytes"]) == 4


def test_a_plan_over_its_devices_memory_is_warned_about():
  """Minimizing runtime on devices too small for the graph: the answer stands, and the result
  and the summary say by how much each device is over (the plan would not run there)."""
  from regal_datasets import devices as devices_lib
  from regal_datasets.synthetic import sized_graph
  from regal.app import methods, optimize_lib
  from regal.app import report as report_lib
  report = optimize_lib.run(sized_graph(30), devices_lib.homogeneous(2, memory_capacity=1.0),
                            methods.RunConfig(evals=400))
  result = report.result
  assert result.feasible and len(result.memory_excess) == 2
  assert max(result.memory_excess) > 0
  assert "OVER MEMORY:" in report_lib.summary(report)
  roomy = optimize_lib.run(sized_graph(30), devices_lib.homogeneous(2),
                           methods.RunConfig(evals=400)).result
  assert roomy.memory_excess is None
