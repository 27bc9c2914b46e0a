r"""A paired A/B of search settings on the WC training graphs: does a setting pay, at equal
evaluations, on graphs no default was chosen on the test graphs of?

  python -m regal_experiments.search_ab --variant relabel_fraction=0.1 --seeds 20-29
  python -m regal_experiments.search_ab --variant population_size=400 --seeds 20-29
  python -m regal_experiments.search_ab --quick          # 2 graphs, 2 seeds, small budgets

Both arms run the default search (`regal.optimize`'s, heuristic seeds included) with its
default budget (`brkga_search.default_evals`, passed explicitly, so no wall-clock guard ends a
run and the rows do not depend on the machine's load); the variant arm changes only the named
settings: any search setting of the presets (`brkga_presets.SEARCH_KEYS`) and the engine's
`population_size` (with `elite_fraction` and `mutant_fraction`, by default 20% elites and 15%
mutants, as Goncalves & Resende's rule sizes them), `rho`, `num_populations` (independent
islands of that size; the heuristic seeds start the first) and `restart_patience`. The
graphs are the sharded workloads in shapes the test graphs (`regal_experiments.seed_spread`,
`regal_experiments.search_targets`) do not use.

Gap = objective / the best objective any run in the rows file reached on that graph - 1, so
a report's gaps move as more runs are added. The report gives, over (graph, seed) pairs, both
arms' mean gap, the mean difference with a 95% bootstrap interval (graphs resampled, then
seeds within each), wins and losses, and how many runs end within 1% of the best; then the
same per graph. Rows are a journal (`--out`/rows-full.jsonl, rows-quick.jsonl): a run is
recorded once it has finished, and a rerun of the command runs only what is missing (after a
kill, too).
Seed-to-seed noise is several percent: compare on fresh seeds before trusting a gain.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import atomic, cli, errors, sharded  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal_experiments.search_ab_lib import (  # noqa: E402
    BASELINE, QUICK_EVALS, QUICK_GRAPHS, TRAINING_GRAPHS, arm_name, arm_settings, graph_label,
    markdown, parse_seeds, parse_variant, run_one, settings_key, summarize)
from regal.scoring import performance  # noqa: E402
from regal.search import brkga_search  # noqa: E402

_VARIANT = flags.DEFINE_list("variant", [], "The variant arm's settings, KEY=VALUE each: "
                             "search settings (brkga_presets.SEARCH_KEYS), population_size, "
                             "elite_fraction, mutant_fraction, rho, num_populations, "
                             "restart_patience, prior_q and prior_spread (the bottom-level "
                             "prior on the priority genes).")
_SEEDS = flags.DEFINE_string("seeds", "20-29", "Seeds of both arms: FIRST-LAST or a,b,c.")
_QUICK = flags.DEFINE_bool("quick", False, "2 small graphs, seeds 0-1, 3,000 evaluations.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "search_ab"),
                           "Output directory (rows.jsonl and the report).")


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  variant = parse_variant(_VARIANT.value)
  if not variant:
    raise errors.ConfigError("--variant must name at least one setting to compare")
  if _QUICK.value and flags.FLAGS["seeds"].present:
    raise errors.ConfigError("--quick runs seeds 0-1: drop --seeds, or --quick")
  seeds = [0, 1] if _QUICK.value else parse_seeds(_SEEDS.value)
  graphs = QUICK_GRAPHS if _QUICK.value else TRAINING_GRAPHS
  device_sets = {4: devices_lib.homogeneous(4), 8: devices_lib.nvlink_two_groups(4)}
  problems = {graph_label(w, c, a): performance.Problem(sharded.generate(w, c, **a),
                                                        device_sets[c], model="wc")
              for w, c, a in graphs}
  evals = {label: QUICK_EVALS if _QUICK.value else brkga_search.default_evals(p)
           for label, p in problems.items()}
  arms = {BASELINE: {}, arm_name(variant): variant}
  settings = {(label, arm): arm_settings(p, evals[label], v)  # Checked before any run.
              for label, p in problems.items() for arm, v in arms.items()}
  mode = "quick" if _QUICK.value else "full"
  path = os.path.join(_OUT.value, f"rows-{mode}.jsonl")
  atomic.check_output_dir(_OUT.value, "--out")
  keys = {pair: settings_key(*arm) for pair, arm in settings.items()}
  # A row of another arm counts towards the best of the graph; a row of these arms only
  # under the settings they run now (e.g. not the baseline's rows of an earlier default).
  done = {(r["graph"], r["arm"], r["seed"]): r for r in atomic.read_json_lines(path)
          if r.get("evals_budget") == evals.get(r.get("graph"))
          and keys.get((r["graph"], r["arm"]), r.get("settings")) == r.get("settings")}
  todo = [(label, arm, seed) for label in problems for seed in seeds for arm in arms
          if (label, arm, seed) not in done]
  started = time.perf_counter()
  for count, (label, arm, seed) in enumerate(todo, 1):
    params, search_settings = settings[(label, arm)]
    row = {"graph": label, "arm": arm, "seed": seed, "evals_budget": evals[label],
           "settings": keys[(label, arm)],
           **run_one(problems[label], seed, evals[label], params, search_settings)}
    cli.exit_if_stopped()
    atomic.append_json_line(path, row)
    done[(label, arm, seed)] = row
    print(f"[{count}/{len(todo)}, {time.perf_counter() - started:.0f} s] {label} {arm} seed "
          f"{seed}: {row['objective']:.6g} ({row['seconds']:.1f} s)", flush=True)
  summary = summarize(list(done.values()), arm_name(variant), seeds, list(problems))
  header, facts = report.header("Search settings A/B on the WC training graphs",
                                "regal_experiments.search_ab", mode)
  name = "search_ab-" + "".join(c if c.isalnum() or c in "._-" else "_"
                                for c in arm_name(variant))
  report.publish(_OUT.value, name, header, markdown(summary, seeds, evals),
                 {**facts, "seeds": seeds, "evals": evals, "summary": summary,
                  "rows_file": os.path.basename(path)})


if __name__ == "__main__":
  cli.run_cli(main)
