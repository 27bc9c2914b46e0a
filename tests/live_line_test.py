"""The search's live line speaks the summary's unit: its last best objective is the summary's
objective, in the unit the summary prints times in (the model's value, not the search's
internal score), on graphs whose costs are Doppler's units, seconds of a nominal device and
an accelerator's roofline."""
import re

import pytest
from conftest import SHARED_GRAPHS

from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets import sharded, zoo
from regal.app import methods, optimize_lib
from regal.parallelism import hardware
from regal.app import report as report_lib
from regal.search import progress as search_progress


def _doppler():
  path = SHARED_GRAPHS / "doppler" / "ffnn_192nodes.txt"
  if not path.exists():
    pytest.skip("../shared/graphs is not beside the checkout")
  return graph_io.load_graph(str(path)), devices_lib.homogeneous(4), "doppler"


CASES = {
    "doppler graph": _doppler,
    "sharded workload": lambda: (sharded.generate("chain_mm", 4), devices_lib.homogeneous(4),
                                 "wc"),
    "zoo model on h100": lambda: (zoo.model_graph("llama_block", seq_len=64),
                                  hardware.resolve(4, None, "h100"), "wc"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_live_lines_last_best_is_the_summarys_objective(case, capsys):
  graph, devices, model = CASES[case]()
  said = []
  report = optimize_lib.run(graph, devices, methods.RunConfig(
      model=model, evals=1500,
      brkga=methods.BrkgaOptions(progress=search_progress.Reporter(say=said.append))))
  live = [line for line in capsys.readouterr().out.splitlines() if "best objective" in line]
  summary = report_lib.summary(report)
  unit = re.search(r"times in ([\w ]+)", summary)[1].strip()
  objective = re.search(r"^best: +objective (\S+)", summary, re.M)[1]
  assert said and said[0].startswith("searching: BRKGA")
  assert live[-1].split("best objective ")[1].startswith(f"{objective} {unit},"), (live, summary)
  assert unit in ("Doppler units", "ms", "us", "s")
