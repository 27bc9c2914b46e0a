"""`regal.optimize` on a training step (regal/app/training_lib.py): the mesh search, each
configuration, the result's baselines, and the flags it refuses."""
import json

import pytest
from cli_test import assert_one_line_error, run

PLAN = ("regal.optimize", "--devices", "8", "--device_preset", "h100")


@pytest.fixture(scope="module")
def gpt2_step(tmp_path_factory):
  path = tmp_path_factory.mktemp("train") / "gpt2.json"
  made = run("regal_datasets.zoo", "--model", "gpt2_medium", "--batch", "8", "--seq_len",
             "128", "--layers", "4", "--step", "train", "--out", str(path))
  assert made.returncode == 0, made.stderr
  return path


def test_the_search_plans_a_step_no_slower_than_any_configuration(gpt2_step, tmp_path):
  out = tmp_path / "r.json"
  done = run(*PLAN, "--graph", str(gpt2_step), "--shard", "auto", "--out", str(out))
  assert done.returncode == 0, done.stderr
  result = json.loads(out.read_text())
  assert set(result["baselines"]) == {"data_parallel", "fsdp", "tensor_parallel",
                                      "tensor_data", "pipeline_data"}
  fitting = [b["step_ms"] for b in result["baselines"].values() if b["feasible"]]
  assert result["feasible"] and result["plan"]["step_ms"] <= min(fitting)
  assert result["plan"]["mesh"]["name"] in done.stdout
  assert "memory_per_device_gb" in result["plan"] and "verdict: fits" in done.stdout


def test_method_auto_is_the_search(gpt2_step, tmp_path):
  searched, named = tmp_path / "s.json", tmp_path / "n.json"
  assert run(*PLAN, "--graph", str(gpt2_step), "--shard", "auto", "--out",
             str(searched)).returncode == 0
  done = run(*PLAN, "--graph", str(gpt2_step), "--method", "auto", "--out", str(named))
  assert done.returncode == 0, done.stderr
  assert json.loads(named.read_text())["plan"] == json.loads(searched.read_text())["plan"]


def test_a_named_configuration_is_the_plan(gpt2_step, tmp_path):
  out = tmp_path / "r.json"
  done = run(*PLAN, "--graph", str(gpt2_step), "--method", "tensor_parallel", "--out",
             str(out))
  assert done.returncode == 0, done.stderr
  result = json.loads(out.read_text())
  assert result["plan"] == result["baselines"]["tensor_parallel"]
  assert result["plan"]["mesh"]["tensor"] == 8


def test_llama_7b_data_parallel_does_not_fit_and_says_why(tmp_path):
  graph = tmp_path / "llama.json"
  made = run("regal_datasets.zoo", "--model", "llama_7b", "--batch", "8", "--seq_len", "2048",
             "--step", "train", "--out", str(graph))
  assert made.returncode == 0, made.stderr
  done = run(*PLAN, "--graph", str(graph), "--method", "data_parallel")
  assert done.returncode == 3, done.stderr
  assert "does not fit" in done.stdout and "optimizer_state" in done.stdout
  searched = run(*PLAN, "--graph", str(graph), "--shard", "auto", "--out",
                 str(tmp_path / "r.json"))
  assert searched.returncode == 0, searched.stderr
  result = json.loads((tmp_path / "r.json").read_text())
  assert result["feasible"] and not result["baselines"]["data_parallel"]["feasible"]
  # Not even with every block recomputed: the weights and Adam's state alone overflow.
  assert result["baselines"]["data_parallel"]["mesh"]["recomputed"] == 32
  assert result["recomputation"].startswith("searched")
  assert result["wall_seconds"] < 60


@pytest.mark.parametrize("args,message", [
    (("--shard", "auto", "--method", "fsdp"), "give --shard auto (the search) or --method fsdp"),
    (("--shard", "auto", "--evals", "100"), "--evals would do nothing here"),
    (("--shard", "4", "--method", "fsdp"), "--shard 4: a training step's mesh is searched"),
])
def test_flags_a_mesh_plan_does_not_read_are_refused(gpt2_step, args, message):
  assert_one_line_error(run(*PLAN, "--graph", str(gpt2_step), *args), message)


def test_a_configuration_needs_a_training_step_and_accelerators(gpt2_step):
  assert_one_line_error(
      run("regal.optimize", "--devices", "8", "--graph", str(gpt2_step), "--shard", "auto"),
      "a training step is planned on accelerators of one kind")
  assert_one_line_error(run("regal.optimize", "--devices", "4", "--method", "fsdp"),
                        "--method fsdp plans a training step's mesh")
