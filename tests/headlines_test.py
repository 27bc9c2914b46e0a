"""The headline numbers: both READMEs quote, verbatim, the table computed from the committed
reports (`python -m regal_experiments.headlines --write` after regenerating a report)."""
import copy

import pytest

from regal_experiments import headlines


@pytest.fixture(scope="module")
def reports():
  return headlines.load_reports()


@pytest.mark.parametrize("readme", headlines.READMES, ids=["README", "experiments_README"])
def test_readme_quotes_the_reports(readme, reports):
  with open(readme) as f:
    quoted = headlines.quoted(f.read())
  assert quoted is not None, f"{readme} lost its headline markers"
  assert quoted == headlines.headline_table(reports), (
      f"{readme} disagrees with the committed reports: run python -m regal_experiments.headlines "
      f"--write")


def test_the_table_reads_the_reports(reports):
  """A report's figure moves the table (the comparison above cannot pass on stale text)."""
  changed = copy.deepcopy(reports)
  rows = changed["search_targets"]["synthetic"]
  wins = [k for k, row in enumerate(rows) if row["ratio"] < 1]
  rows[wins[0]]["ratio"] = 2.0  # The search lost on one graph it had won.
  table = headlines.headline_table(changed)
  assert (f"better on {len(wins) - 1} of {len(rows)}" in table
          and table != headlines.headline_table(reports))
  overall = changed["task_graph_table"]["summary"]["sinnen"]["overall"]
  overall["brkga"].update(mean_gap_pct=3.0, optimal_share=0.882, seconds_per_instance=0.71)
  assert "**3.00% / 88.2% / 0.71 s**" in headlines.headline_table(changed)


def test_write_changes_no_readme_when_one_lacks_its_markers(tmp_path, monkeypatch):
  """`--write` checks every target before it writes any: the first README was once rewritten
  before the second was found without its markers (exit 2 with one file changed)."""
  from regal_datasets import errors
  first, second = tmp_path / "README.md", tmp_path / "other.md"
  first.write_text(f"intro\n{headlines.BEGIN}\nold table\n{headlines.END}\n")
  second.write_text("no markers here\n")
  monkeypatch.setattr(headlines, "READMES", (str(first), str(second)))
  monkeypatch.setattr(headlines, "_WRITE", type("Flag", (), {"value": True}))
  with pytest.raises(errors.ConfigError, match="no .* markers"):
    headlines.main(["headlines"])
  assert first.read_text() == f"intro\n{headlines.BEGIN}\nold table\n{headlines.END}\n"
