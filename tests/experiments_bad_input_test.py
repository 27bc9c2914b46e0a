"""Bad input to the experiment and benchmark commands, one case per row, as
`tests/bad_input_test.py` holds them for the main commands: each ends in one `error: ...` line
and exit 2 before any work, with no traceback and no file written. The command lines of one
module run in one process (`tests/cli_cases.py`)."""
import os

import pytest
from bad_input_test import run_module

UNWRITABLE = "/proc/regal_out"  # A folder no one can create: refused before the work.
EXPERIMENT_CASES = {
    "regal_experiments.profiled_table": [
        ("profiled_cpsat_seconds_nan", ["--cpsat_seconds", "nan"],
         "--cpsat_seconds must be a finite number, got nan"),
        ("profiled_dp_seconds_negative", ["--dp_seconds=-1"], "flag --dp_seconds=-1"),
        ("profiled_unknown_section", ["--sections", "nope"], "--sections: unknown 'nope'"),
        ("profiled_quick_with_seeds", ["--quick", "--seeds", "3"],
         "--seeds would do nothing here: --quick sets its own value"),
        ("profiled_quick_with_the_scale_section", ["--quick", "--sections", "scale"],
         "--sections scale would do nothing here: --quick skips the scale section"),
        ("profiled_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
        ("profiled_stray_argument", ["extra"], "unexpected arguments: extra"),
    ],
    "regal_experiments.latency_rounds": [
        ("latency_rounds_zero_seconds", ["--seconds", "0"],
         "flag --seconds=0: 0.0 is not a number in the range [0.01, 3600.0]"),
        ("latency_rounds_quick_with_seconds", ["--quick", "--seconds", "7"],
         "--seconds would do nothing here: --quick sets its own value"),
        ("latency_rounds_unknown_workload", ["--workloads", "nope"],
         "--workloads: unknown 'nope'"),
        ("latency_rounds_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.search_targets": [
        ("search_targets_unknown_section", ["--sections", "nope"], "--sections: unknown 'nope'"),
        ("search_targets_no_graphs", ["--synthetic_graphs", "0"], "flag --synthetic_graphs=0"),
        ("search_targets_quick_with_graphs", ["--quick", "--synthetic_graphs", "4"],
         "--synthetic_graphs would do nothing here"),
        ("search_targets_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.group_island": [
        ("group_island_unknown_arm", ["--arms", "default,oracle"], "--arms"),
        ("group_island_quick_with_workloads", ["--quick", "--workloads", "ffnn"],
         "--workloads would do nothing here: --quick sets its own value"),
        ("group_island_negative_seed", ["--seeds=-1"], "--seeds takes one or more integers"),
        ("group_island_unreadable_seed_spread", ["--seed_spread", "/nonexistent.json"],
         "--seed_spread /nonexistent.json does not read"),
        ("group_island_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
        ("group_island_training_with_seed_spread", ["--graphs", "training", "--seed_spread",
                                                    "x.json"],
         "--seed_spread would do nothing here: --graphs training carries no best known"),
    ],
    "regal_experiments.seed_spread": [
        ("seed_spread_negative_seed", ["--seeds=-1"], "take seeds from 0 to 4294967295"),
        ("seed_spread_quick_with_reference_evals", ["--quick", "--reference_evals", "500"],
         "--reference_evals would do nothing here"),
        ("seed_spread_tolerance_nan", ["--tolerance_pct", "nan"],
         "--tolerance_pct must be a finite number"),
        ("seed_spread_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.task_graph_table": [
        ("task_graph_quick_with_sample", ["--quick", "--sample", "3"],
         "--sample would do nothing here"),
        ("task_graph_time_limit_inf", ["--time_limit", "inf"], "flag --time_limit=inf"),
        ("task_graph_tiny_budget", ["--evals", "10"], "flag --evals=10"),
        ("task_graph_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
        ("task_graph_unknown_set", ["--sets", "sinnen,constructed"],
         "unknown set 'constructed'; known: sinnen, stg, constructed_train, constructed_test"),
        ("task_graph_constructed_dir_without_its_sets", ["--constructed_dir", "somewhere"],
         "--constructed_dir would do nothing here"),
    ],
    "regal_experiments.baselines_table": [
        ("baselines_zero_budget", ["--evals", "0"], "flag --evals=0"),
        ("baselines_seed_past_32_bits", ["--seed", str(2 ** 40)], "flag --seed="),
        ("baselines_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.scaling": [
        ("scaling_zero_population", ["--populations", "0"],
         "--populations takes one or more integers from 1 to 1,000,000, got '0'"),
        ("scaling_zero_devices", ["--devices", "0"], "flag --devices=0"),
        ("scaling_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.regal_table": [
        ("regal_table_limits_not_integers", ["--limits", "1000,x"], "--limits takes integers"),
        ("regal_table_time_limit_nan", ["--time_limit", "nan"],
         "--time_limit must be a finite number"),
    ],
    "regal_experiments.doppler_table": [
        ("doppler_table_zero_repeats", ["--repeats", "0"], "flag --repeats=0"),
        ("doppler_table_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.learning_table": [
        ("learning_table_max_graphs_huge", ["--max_graphs", str(10 ** 12)],
         "flag --max_graphs="),
    ],
    "regal_experiments.portfolio_thresholds": [
        ("portfolio_thresholds_stray_argument", ["extra"], "unexpected arguments: extra"),
        ("portfolio_thresholds_out_unwritable", ["--out", UNWRITABLE], "cannot write there"),
    ],
    "regal_experiments.headlines": [
        ("headlines_stray_argument", ["extra"], "unexpected arguments: extra"),
    ],
    "regal_experiments.bench.doppler_scorer": [
        ("doppler_scorer_quick_with_checked", ["--quick", "--checked", "50"],
         "--checked would do nothing here"),
    ],
    "regal_experiments.bench.doppler_episodes": [
        ("doppler_episodes_quick_with_batch", ["--quick", "--batch", "4"],
         "--batch would do nothing here"),
        ("doppler_episodes_a_million_devices", ["--devices", "1000000"], "flag --devices="),
    ],
    "regal_experiments.bench.perf_model": [
        ("perf_model_sizes_not_integers", ["--sizes", "x"], "--sizes takes integers, got 'x'"),
        ("perf_model_unknown_engine", ["--engines", "gpu"], "--engines: unknown 'gpu'"),
        ("perf_model_json_unwritable", ["--json", UNWRITABLE + "/x.json"], "cannot write there"),
    ],
    "regal_experiments.bench.brkga": [
        ("bench_brkga_unknown_engine", ["--engines", "gpu"], "--engines: unknown 'gpu'"),
        ("bench_brkga_zero_budget", ["--evals", "0"], "flag --evals=0"),
    ],
    "regal_experiments.bench.profile_wc": [
        ("profile_wc_one_op", ["--ops", "1"], "flag --ops=1"),
    ],
    "regal_experiments.bench.compare_wc": [
        ("compare_wc_zero_rounds", ["--rounds", "0"], "flag --rounds=0"),
    ],
}
ALL_CASES = [(module, *case) for module, cases in EXPERIMENT_CASES.items() for case in cases]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
  """Every case's exit code and output, and the files the cases left in their folder."""
  folder = tmp_path_factory.mktemp("experiments_bad_input")
  results = {}
  for module, cases in EXPERIMENT_CASES.items():
    results.update(run_module(module, cases, folder))
  return results, sorted(os.listdir(folder))


@pytest.mark.parametrize("module, case_id, args, message", ALL_CASES,
                         ids=[case[1] for case in ALL_CASES])
def test_bad_input_gets_one_line_before_any_work(outcomes, module, case_id, args, message):
  results, _ = outcomes
  result = results[case_id]
  assert result["code"] == 2, (module, result)
  error_lines = [line for line in result["stderr"].splitlines() if line.startswith("error: ")]
  assert len(error_lines) == 1 and message in error_lines[0], (module, result["stderr"])
  assert "Traceback" not in result["stderr"], result["stderr"]


def test_no_case_wrote_anything(outcomes):
  assert outcomes[1] == []
