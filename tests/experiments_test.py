"""The experiment commands' --quick modes, end to end (`pytest -m experiments`, ~20 minutes on
2 cores; left out of the default run). Each must write its report, headed by the command and
the date, its JSON and its plots, and exit 0."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.experiments

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_quick(module: str, out: str, *extra: str) -> dict:
  completed = subprocess.run([sys.executable, "-m", module, "--quick", "--out", out, *extra],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
  assert completed.returncode == 0, completed.stderr[-3000:]
  return completed


def read_report(out: str, name: str) -> tuple[str, dict]:
  with open(os.path.join(out, name + ".md")) as f:
    markdown = f.read()
  with open(os.path.join(out, name + ".json")) as f:
    data = json.load(f)
  assert data["command"].startswith("python -m regal_experiments.") and "--quick" in data["command"]
  assert f"- command: `{data['command']}`" in markdown and f"- date: {data['date']}" in markdown
  assert data["mode"].startswith("quick")
  return markdown, data


def test_regal_table_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.regal_table", out)
  markdown, data = read_report(out, "regal_table")
  methods = [r["method"] for r in data["rows"]]
  assert {"cpsat", "gp_dfs", "local_search", "hill_climb", "brkga", "idrs", "regal", "search",
          "hill_climb_long", "search_long"} <= set(methods)
  # Each row's figures from the per-graph objectives the report also keeps.
  reference = np.asarray(data["objectives"]["brkga"], float)
  best_known = np.asarray(data["best_known"], float)
  for row in data["rows"]:
    values = np.asarray(data["objectives"][row["method"]], float)
    assert row["improvement_over_brkga_pct"] == pytest.approx(
        np.mean(100 * (reference - values) / reference), abs=1e-9)
    assert row["gap_from_best_known_pct"] == pytest.approx(
        np.mean(100 * (values - best_known) / best_known), abs=1e-9)
  assert np.array_equal(best_known, np.min([data["objectives"][r["method"]]
                                            for r in data["rows"]], axis=0))
  # The best known is the best of the methods, so no gap is negative and one row reaches it.
  assert min(r["gap_from_best_known_pct"] for r in data["rows"]) >= 0
  assert max(r["best_known_share"] for r in data["rows"]) > 0
  bounds = [b for b in data["cpsat_lower_bounds"] if b is not None]
  assert all(b <= best * (1 + 1e-6) for b, best in zip(bounds, data["best_known"]))
  assert [p["evals"] for p in data["figure3"]] == [1000, 2000]
  for png in ("regal_table_fig2.png", "regal_table_fig3.png"):
    assert os.path.getsize(os.path.join(out, png)) > 1000 and png in markdown


def test_doppler_table_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.doppler_table", out)
  _, data = read_report(out, "doppler_table")
  (suite,) = data["suites"]
  assert suite["suite"] == "measured4" and [r["graph"] for r in suite["rows"]] == [
      "chain_mm", "ffnn"]
  for row in suite["rows"]:
    simulated = row["simulated"]
    assert min(simulated.values()) >= row["lower_bound"] * (1 - 1e-6)
    # BRKGA seeded by critical path never ends worse than its seed.
    assert simulated["brkga_cp"] <= simulated["critical_path"] * (1 + 1e-6)
    assert set(row["measured_ms"]) == set(simulated) and min(row["measured_ms"].values()) > 0
  (transfer,) = data["transfer"]["rows"]
  assert (transfer["source"], transfer["target"]) == ("ffnn", "llama_block")
  assert transfer["few_shot"] <= transfer["zero_shot"] * (1 + 1e-6)


def test_scaling_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.scaling", out)
  markdown, data = read_report(out, "scaling")
  sizes = sorted({(r["family"], r["coarsen"]) for r in data["optimize"]})
  assert sizes == [("synthetic", "auto"), ("synthetic", "off"), ("zoo", "auto"), ("zoo", "off")]
  for row in data["optimize"]:
    assert row["objective"] <= row["single_device"] * (1 + 1e-6)
    assert row["coarse_ops"] <= row["ops"] and (row["coarse_ops"] < row["ops"]) == (
        row["coarsen"] == "auto")
  assert {(r["ops"], r["population"]) for r in data["throughput"]} == {
      (100, 64), (100, 256), (1000, 64), (1000, 256)}
  assert os.path.getsize(os.path.join(out, "scaling.png")) > 1000


def test_brkga_tuning_quick_saves_a_preset(tmp_path):
  presets = tmp_path / "presets.json"
  completed = run_quick("regal_experiments.sweep", str(tmp_path), "--sweep", "brkga_tuning",
                        "--local", "--save_preset", "tuned", "--presets_file", str(presets))
  assert "saved BRKGA preset 'tuned'" in completed.stdout
  saved = json.loads(presets.read_text())["tuned"]
  with open(tmp_path / "brkga_tuning-quick.jsonl") as f:
    records = [json.loads(line) for line in f]
  best = min(records, key=lambda r: r["result"]["score"])
  assert saved["setting"] == {k: best["params"][k] for k in saved["setting"]}
  assert saved["provenance"]["score"] == best["result"]["score"]
  ranks = [line.split(" | ")[0] for line in
           (tmp_path / "brkga_tuning-quick.md").read_text().splitlines()
           if line.startswith("| ") and line.split(" | ")[0][2:].isdigit()]
  assert ranks == ["| 1", "| 2"]


def test_task_graph_table_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.task_graph_table", out, "--methods",
            "critical_path,heft,hill_climb,cpsat,brkga,saga:Heft,saga:Cpop")
  markdown, data = read_report(out, "task_graph_table")
  for set_name in ("sinnen", "stg"):
    overall = data["summary"][set_name]["overall"]
    assert {"critical_path", "heft", "hill_climb", "cpsat", "brkga"} <= set(overall)
    for stats in overall.values():
      # Sinnen's optima are all proven; STG's unproven rows compare with an upper bound.
      assert stats["mean_gap_pct"] >= (0 if set_name == "sinnen" else -5)
      assert 0 <= stats["optimal_share"] <= 1
    # The climb starts from the best heuristic: never worse than critical path or HEFT.
    assert overall["hill_climb"]["mean_gap_pct"] <= min(
        overall["critical_path"]["mean_gap_pct"], overall["heft"]["mean_gap_pct"]) + 1e-9
  assert "CP-SAT to proven optimality on the 10-task graphs" in markdown


def test_polish_oracle_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.polish_oracle", out)
  markdown, data = read_report(out, "polish_oracle")
  rows = data["rows"]
  assert [r["share"] for r in rows] == [0.02, 0.05, 0.1]
  for r in rows:
    assert 0 <= r["polished_gap_pct"] <= r["start_gap_pct"]  # Never below the optimum.
    assert (r["stop_reason"] == "bound") == (r["polished_gap_pct"] == 0)
    assert 0 <= r["default_gap_pct"] <= r["start_gap_pct"]
    assert 0 <= r["pairs_gap_pct"] <= r["start_gap_pct"]
    assert 0 <= r["targeted_gap_pct"] <= r["start_gap_pct"]
    assert 0 <= r["targeted_compact_gap_pct"] <= r["start_gap_pct"]
  assert "ops moved" in markdown and "pairs - default" in markdown


def test_real_models_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.real_models", out)
  markdown, data = read_report(out, "real_models")
  (row,) = data["summary"]
  assert row["devices"] == 4 and row["auto_seeds"] == 1
  assert row["auto_ms"] <= row["data_parallel_ms"] * (1 + 1e-6) < row["one_device_ms"]
  assert row["lower_bound_ms"] <= row["auto_ms"] and row["auto_improvement_pct"] > 0
  (executed,) = data["execution"]
  assert executed["placements"] >= 10 and -1 <= executed["spearman"] <= 1
  assert "one device" in markdown and os.path.exists(os.path.join(out, "real_models.png"))
  # A killed run resumes: nothing is measured again.
  lines = open(os.path.join(out, "real_models-quick.jsonl")).read().splitlines()
  run_quick("regal_experiments.real_models", out)
  assert open(os.path.join(out, "real_models-quick.jsonl")).read().splitlines() == lines


def test_accelerator_check_quick(tmp_path):
  out = str(tmp_path)
  completed = run_quick("regal_experiments.bench.accelerator", out)
  assert completed.stdout.startswith("no GPU or TPU found")  # On this CPU it says so first.
  markdown, data = read_report(out, "accelerator-cpu")
  (rate,) = data["rates"]
  assert rate["jax"]["evals_per_second"] > 0 and rate["native"]["evals_per_second"] > 0
  rows = data["executed"]["rows"]
  assert set(rows) == {"best", "single_device"} and data["executed"]["preset"] == "cpu"
  assert all(r["measured_ms"] > 0 and r["predicted_ms"] > 0 for r in rows.values())
  assert "jax / native" in markdown


def test_doppler_scorer_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.bench.doppler_scorer", out)
  _, data = read_report(out, "doppler_scorer")
  assert len(data["rows"]) == 5 and all(r["mismatches"] == 0 for r in data["rows"])
  assert all(r["plain_loop_evals_per_second"] > 0 for r in data["rows"])
  assert data["search"]["devices"] == 8 and data["search"]["evaluations"] > 0
  assert all(r["speedup"] > 1 for r in data["rows"])


def test_search_profile_quick(tmp_path):
  """Both buckets searched, every second accounted for, the inert genes' bucket the larger."""
  out = str(tmp_path)
  run_quick("regal_experiments.bench.search_profile", out)
  markdown, data = read_report(out, "search_profile")
  default, kept = (data["runs"][label] for label in (
      "default (no transfer genes)", "inert transfer genes kept"))
  assert kept[0]["bucket_genes"] > default[0]["bucket_genes"]
  for row in default + kept:
    assert 4000 < row["evaluations"] <= 5000 and row["event_loop_seconds"] > 0
    assert row["jax_and_dispatch_seconds"] > 0 and row["other_host_seconds"] >= 0
  assert "Median search seconds with the inert transfer genes kept / without them" in markdown


def test_doppler_episodes_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.bench.doppler_episodes", out)
  markdown, data = read_report(out, "doppler_episodes")
  assert data["ops"] == 182 and data["batch"] == 16
  assert data["episodes_per_second"] > data["episodes_per_second_stage_two_step"] > 0
  assert data["simpy_simulator_calls_per_second"] > 0
  (run,) = data["training"]
  assert run["ops"] == 42 and run["episodes"] == 128 and run["imitation_steps"] >= 1
  assert 0 < run["reinforce_seconds"] < run["total_seconds"]
  assert "## The whole policy training (1 run)" in markdown
  assert "Target" not in markdown  # Only a 300-op, 5,000-episode run is held to it.


def test_search_targets_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.search_targets", out)
  markdown, data = read_report(out, "search_targets")
  assert len(data["doppler"]) == 2 and len(data["synthetic"]) == 3
  assert len(data["wc"]) == 8  # Two Doppler files and two sharded workloads, 4 and 8 devices.
  for row in data["wc"]:
    # The user's answer is never worse than a seed, and the table says what the search found.
    assert row["objective"] <= row["best_seed"] and row["search"] >= row["objective"]
  assert "hill climb 20K" in markdown and "local search" in markdown


def test_learning_table_quick(tmp_path):
  """On a tiny trained workdir (the :test preset): both arms per graph and seed, the
  statistics, the plot."""
  workdir = str(tmp_path / "policy")
  completed = subprocess.run(
      [sys.executable, "-m", "regal.train", f"--config={REPO_ROOT}/regal/learning/configs/"
       "default.py:test", "--workdir", workdir], cwd=REPO_ROOT, capture_output=True, text=True,
      timeout=1200)
  assert completed.returncode == 0, completed.stderr[-3000:]
  out = str(tmp_path / "table")
  run_quick("regal_experiments.learning_table", out, "--policy", workdir, "--evals", "500")
  markdown, data = read_report(out, "learning_table")
  result = data["results"]["500"]
  rows, summary = result["rows"], result["summary"]
  assert len(rows) == 2 and all(len(r["guided"]) == len(r["unguided"]) == 3 for r in rows)
  assert summary["pairs"] == 6 and summary["win_rate"] + summary["loss_rate"] <= 1
  low, high = summary["ci95_pct"]
  assert low <= summary["mean_improvement_pct"] <= high
  assert all(best <= min(r["unguided"] + r["guided"]) for best, r in
             zip(result["best_known"], rows))
  assert os.path.getsize(os.path.join(out, "learning_table_500.png")) > 1000


def test_profiled_table_quick(tmp_path):
  """Every shared profiled workload, both objectives: the search never above the best
  contiguous split known (throughput) nor the best reference (latency), every answer feasible."""
  out = str(tmp_path)
  run_quick("regal_experiments.profiled_table", out)
  markdown, data = read_report(out, "profiled_table")
  assert len(data["throughput"]) == 12 and len(data["latency"]) == 6
  for row in data["throughput"]:
    assert all(run["feasible"] for run in row["search"])
    assert max(run["value"] for run in row["search"]) <= row["best_contiguous"] + 1e-9
  for row in data["latency"]:
    assert all(run["feasible"] for run in row["search"])
    assert max(run["value"] for run in row["search"]) <= row["best_reference"] + 1e-9
  assert len(data["expert_latency"]) == 6
  for row in data["expert_latency"]:
    assert row["expert"]["feasible"] and all(run["feasible"] for run in row["search"])
    assert max(run["value"] for run in row["search"]) <= row["expert"]["value"] + 1e-9
  assert "Single-sample latency" in markdown and "where the expert splits fit" in markdown


def test_latency_rounds_quick(tmp_path):
  """Every variant of the latency search's rounds, on one workload: contiguous answers (the
  command asserts it), no worse than the start, and each variant paired with the default."""
  out = str(tmp_path)
  run_quick("regal_experiments.latency_rounds", out, "--workloads", "layer_bert24_inference")
  markdown, data = read_report(out, "latency_rounds")
  (row,) = data["rows"]
  assert row["workload"] == "layer_bert24_inference"
  assert set(row["variants"]) == set(data["summary"]) and len(data["summary"]) == 5
  for runs in row["variants"].values():
    assert [r["seed"] for r in runs] == [0, 1]
    assert all(r["latency"] <= row["start"] + 1e-9 for r in runs)
  assert "moves+repair" in markdown


def test_baselines_table_small(tmp_path, shared_graphs):
  # No --quick mode: the Doppler files only, two cheap methods.
  out = str(tmp_path / "baselines")
  completed = subprocess.run(
      [sys.executable, "-m", "regal_experiments.baselines_table", "--synthetic", "0", "--methods",
       "critical_path,heft", "--doppler_dir", str(shared_graphs / "doppler"), "--out", out],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
  assert completed.returncode == 0, completed.stderr[-3000:]
  with open(os.path.join(out, "baselines_table.json")) as f:
    data = json.load(f)
  assert [(r["graph"], r["method"]) for r in data["rows"]] == [
      (graph, method) for graph in ("chain_mm", "ffnn", "llama_block", "llama_layer")
      for method in ("critical_path", "heft")]
  assert all(r["objective"] < r["single_device"] for r in data["rows"])
  markdown = open(os.path.join(out, "baselines_table.md")).read()
  assert "| graph | ops | model | one device | critical_path | heft | CP-SAT bound |" in markdown


def test_search_ab_quick_and_resumed(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.search_ab", out, "--variant", "relabel_fraction=0.1")
  markdown, data = read_report(out, "search_ab-relabel_fraction_0.1")
  rows_path = os.path.join(out, data["rows_file"])
  with open(rows_path) as f:
    rows = [json.loads(line) for line in f]
  assert len(rows) == 8 and {r["arm"] for r in rows} == {"default", "relabel_fraction=0.1"}
  assert data["summary"]["pairs"] == 4 and "4 pairs" in markdown
  # One baseline row as an earlier default would have left it: other settings.
  rows[0 if rows[0]["arm"] == "default" else 1]["settings"] = "an earlier default"
  stale = rows[0] if rows[0]["arm"] == "default" else rows[1]
  with open(rows_path, "w") as f:
    f.writelines(json.dumps(row) + "\n" for row in rows)
  run_quick("regal_experiments.search_ab", out, "--variant", "relabel_fraction=0.1")
  with open(rows_path) as f:
    again = [json.loads(line) for line in f]
  # Every other run was recorded and none runs again; the stale one runs under today's.
  assert len(again) == 9
  assert [again[-1][k] for k in ("graph", "arm", "seed")] == [stale[k] for k in
                                                               ("graph", "arm", "seed")]
  assert again[-1]["settings"] != "an earlier default"


def test_prior_table_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.prior_table", out, "--oracle", "3000")
  markdown, data = read_report(out, "prior_table_oracle3000")
  assert [r["arm"] for r in data["rows"]] == ["q=0.3", "oracle order q=0.3",
                                              "oracle all q=0.3"]
  assert all(r["ci95_pct"][0] <= r["mean_improvement_pct"] <= r["ci95_pct"][1]
             for r in data["rows"])
  assert len(data["objectives"]["unguided"]) == 4 and "Verdict: the best arm, q=0.3" in markdown


def test_learned_prior_table_quick(tmp_path):
  out = str(tmp_path / "table")
  run_quick("regal_experiments.learned_prior_table", out, "--workdir", str(tmp_path / "labels"),
            "--decompose")
  markdown, data = read_report(out, "learned_prior_table_valid_decompose")
  assert [r["arm"] for r in data["rows"]] == [
      "bottom_level q=0.6", "learned q=0.6", "label oracle q=1",
      "learned order, label placement q=1", "label order, learned placement q=1"]
  assert all(len(v) == 2 and len(v[0]) == 2 for v in data["objectives"].values())
  # The verdict names a guide, never an arm that reads the measured graph's labels.
  assert "Verdict: the best learned arm, learned q=0.6" in markdown
  assert os.path.exists(str(tmp_path / "labels" / "answers_train_2000x2.npz"))


def test_startup_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.bench.startup", out)
  _, data = read_report(out, "startup")
  assert data["answers_agree"] and {"missing graph file", "cyclic graph", "policy of another "
                                    "model", "ONNX without its weights"} <= set(data["mistakes"])
  second = data["runs"]["default"]["second run (caches kept)"][0]
  assert second["compile_numba"] == 0  # Every kernel loaded from numba's cache.
  # The summary's total is the process's wall time (measured outside it: a little more).
  assert second["total"] <= second["process_seconds"] < second["total"] + 0.5


def test_compare_runs_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.bench.compare_runs", out, "--baseline", "HEAD")
  _, data = read_report(out, "compare_runs")
  assert data["answers_agree"] and set(data["runs"]) == {"default"}


def test_group_island_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.group_island", out)
  _, data = read_report(out, "group_island-quick")
  arms = {entry["arm"]: entry for entry in data["summary"]}
  assert set(arms) == {"default", "stage_balanced"}
  assert all(len(entry["gaps_pct"]) == 2 for entry in arms.values())
  assert "vs_default_points" in arms["stage_balanced"]
  rows = [json.loads(line) for line in open(tmp_path / "group_island-quick.jsonl")]
  assert len(rows) == 4 and all(r["evaluations"] <= r["budget"] for r in rows)
  assert all(r["guide_evaluations"] > 0 for r in rows if r["arm"] == "stage_balanced")


def test_problem_route_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.problem_route", out, "--baseline", "HEAD")
  _, data = read_report(out, "problem_route-quick")
  assert set(data["rows"]) == {"this tree", "baseline HEAD"}
  assert all(row["stops"] > 0 for row in data["rows"].values())


def test_policy_cost_quick(tmp_path):
  """The shipped WC x2 prior's cost per regal.optimize call, cold and warm."""
  out = str(tmp_path)
  run_quick("regal_experiments.policy_cost", out)
  markdown, data = read_report(out, "policy_cost_quick")
  (row,) = data["rows"]
  assert row["ops"] == 50 and row["guided"]["cold_guide"] > 0 and row["guided"]["warm_guide"] > 0
  assert row["unguided"]["warm_guide"] is None
  assert data["worst_warm_extra_seconds"] == row["warm_extra_wall"]
  assert "Verdict: once cached the policy adds at most" in markdown


def test_ship_policy_ships_a_training_and_reports_every_shipped_prior(tmp_path):
  workdir, folder, out = (str(tmp_path / name) for name in ("run", "policies", "report"))
  subprocess.run([sys.executable, "-m", "regal.train", "--config=regal/learning/configs/"
                  "default.py:test", "--config.num_actors=0", "--workdir", workdir],
                 cwd=REPO_ROOT, check=True, capture_output=True, timeout=1200)
  for name in ("sync_x2", "again"):
    completed = subprocess.run(
        [sys.executable, "-m", "regal_experiments.ship_policy", "--workdir", workdir, "--name",
         name, "--command", "python -m regal.train ...", "--policies", folder, "--out", out],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
  with open(os.path.join(folder, "index.json")) as f:
    names = [e["name"] for e in json.load(f)["policies"]]
  assert sorted(names) == ["again", "sync_x2"]
  assert all(os.path.exists(os.path.join(folder, n, "prior.msgpack")) for n in names)
  with open(os.path.join(out, "shipped_policies.md")) as f:
    assert "| sync_x2 | sync, 2 devices, runtime |" in f.read()


def test_training_predictions_quick(tmp_path):
  out = str(tmp_path)
  run_quick("regal_experiments.training_predictions", out)
  markdown, data = read_report(out, "training_predictions")
  rows = data["rows"]
  assert len(rows) == 3 and {r["kind"] for r in rows} == {"h100", "a100"}
  for r in rows:  # The measured step is the row's tokens over its published rate.
    tokens = r["global_batch"] * r["sequence"]
    assert r["measured_step_s"] == pytest.approx(tokens / (8 * r["measured_tokens_per_gpu_s"]))
    assert r["ratio"] == pytest.approx(r["predicted_step_s"] / r["measured_step_s"])
    assert r["within"] == (abs(r["ratio"] - 1) <= 0.25)
  assert -1 <= data["spearman_tokens_per_gpu"] <= 1
  assert os.path.exists(os.path.join(out, "training_predictions.png"))
  assert "llm-foundry" in markdown and "within +-25%" in markdown
