"""BRKGA over graphs: obvious optima are found, seeds bound the result, results re-score."""
import numpy as np
import pytest

import regal_brkga as brkga
from regal_datasets import devices as devices_lib
from regal_datasets import synthetic
from regal_datasets.graph import GraphBuilder
from regal import search
from regal.search import brkga_search, guides
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance


def two_chains():
  """Two independent chains of three ops with heavy tensors inside each chain."""
  b = GraphBuilder("two_chains")
  for chain in "ab":
    for i in range(3):
      b.add_op(f"{chain}{i}", 10)
      if i:
        b.add_data_edge(b.add_tensor(f"{chain}{i - 1}", 100), f"{chain}{i}")
  return b.build()


@pytest.mark.parametrize("model", ["wc", "sync"])
def test_two_chains_on_two_devices(model):
  problem = performance.Problem(two_chains(), devices_lib.homogeneous(2), model=model)
  result = search.optimize(performance.Evaluator.of(problem), evals=1500, seed=0)
  assert result.objective == 30  # One chain per device, nothing sent.
  placement = result.placement
  assert len(set(placement[:3])) == 1 and len(set(placement[3:])) == 1
  assert placement[0] != placement[3]
  assert result.seed_objectives["single_device"] == 60
  assert result.evaluations <= 1500


def test_result_rescores_and_never_loses_the_seed():
  graph = synthetic.generate(np.random.default_rng(4))
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  params = brkga.Params(population_size=32, num_elites=6, num_mutants=5)
  result = search.optimize(performance.Evaluator.of(problem), evals=32 * 4, seed=1, params=params)
  assert result.objective <= result.seed_objectives["single_device"]
  value, _ = performance.score_reference(problem, result.best_chromosome)
  assert value == pytest.approx(result.objective, rel=1e-6)
  assert np.all(np.diff(result.history) <= 0)


def test_the_search_breaks_ties_but_answers_with_the_lowest_objective(monkeypatch):
  """On WC the search's score (its history) carries the tie-breaker; the answer is the lowest
  objective among the search's best and its final populations, and the result's objective
  and its seeds' objectives are the model's own."""
  graph = synthetic.generate(np.random.default_rng(5))
  problem = performance.Problem(graph, devices_lib.homogeneous(3), model="wc")
  rescored = []
  objectives = performance.BucketScorer.objectives

  def recording(self, chromosomes):
    values = objectives(self, chromosomes)
    rescored.append(values)
    return values
  monkeypatch.setattr(performance.BucketScorer, "objectives", recording)
  params = search.default_params(problem, 600)
  result = search.optimize(performance.Evaluator.of(problem), evals=600, seed=2, params=params)
  (values,) = rescored
  num_seeds = len(result.seed_objectives)
  final = params.num_populations * params.population_size
  assert len(values) == num_seeds + 1 + final  # The seeds, the best, the final populations.
  assert result.objective == values[num_seeds:].min()
  assert result.objective == performance.score_reference(problem, result.best_chromosome)[0]
  assert result.history[-1] > result.objective  # The score: makespan + TIE_BREAK * mean end.
  single = search.single_device_seed(problem)
  assert result.seed_objectives["single_device"] == np.float32(
      performance.score_reference(problem, single)[0])


@pytest.mark.parametrize("model,objective,restarts", [
    ("wc", "runtime", (50, brkga.SEEDS)),
    ("wc", "memory", (100, brkga.BEST)),
    ("doppler", "runtime", (100, brkga.BEST)),
    ("delay", "runtime", (100, brkga.BEST))])
def test_a_tie_breaking_search_restarts_sooner_from_its_seeds(model, objective, restarts):
  """The default search's restarts (`restarts_for`), as `run_guided` and `default_params`
  build them: the WC runtime search (whose score breaks ties) restarts after 50 stagnant
  generations from its seeds, every other after 100 from the best."""
  problem = performance.Problem(two_chains(), devices_lib.homogeneous(2), model=model,
                                objective=objective)
  assert brkga_search.restarts_for(performance.breaks_ties(problem)) == restarts
  for params in (search.default_params(problem, 5000), guides.plan_search(problem, 5000).params):
    assert (params.restart_patience, params.restart_from) == restarts


def test_the_consumer_decoder_searches_without_transfer_genes():
  """It derives the transfer priorities from the op order, so its search evolves no transfer
  genes; the answer has the graph's whole layout, with the derived priorities, and the direct
  decoder reads it back to its objective. A shape without transfer genes is refused to a
  decoder that reads them."""
  problem = performance.Problem(two_chains(), devices_lib.homogeneous(2), model="wc")
  assert brkga_search.padded_shape(problem, "consumer").bucket.num_tensors == 0
  assert brkga_search.padded_shape(problem, "direct").bucket.num_tensors > 0
  settings = search.SearchSettings(decoder="consumer")
  result = search.optimize(settings.evaluator(problem), evals=600, seed=0, settings=settings)
  assert result.best_chromosome.shape == (problem.layout.size,)
  assert performance.score_reference(problem, result.best_chromosome)[0] == pytest.approx(
      result.objective, rel=1e-6)
  with pytest.raises(ValueError, match="transfer genes"):
    search.optimize(performance.Evaluator.of(problem), evals=600, seed=0,
                    shape=brkga_search.padded_shape(problem, "consumer"))


@pytest.mark.parametrize("model", ["doppler", "delay", "wc"])
def test_a_model_that_reads_no_transfer_priorities_searches_without_transfer_genes(model):
  """Its search evolves no transfer genes; the result still has the graph's whole layout (the
  transfers unset) and re-scores to its objective."""
  problem = performance.Problem(two_chains(), devices_lib.homogeneous(2), model=model)
  reads = model == "wc"
  assert (search.search_layout(performance.Evaluator.of(problem)).num_tensors > 0) == reads
  result = search.optimize(performance.Evaluator.of(problem), evals=600, seed=0)
  assert result.best_chromosome.shape == (problem.layout.size,)
  transfers = result.best_chromosome[problem.layout.transfer_slice]
  assert reads or np.all(transfers == chromosome_lib.UNSET_TRANSFER)
  assert performance.score_reference(problem, result.best_chromosome)[0] == pytest.approx(
      result.objective, rel=1e-6)


def test_the_live_line_is_rewritten_on_a_terminal_and_periodic_in_a_log():
  import io
  from regal.search import progress as search_progress
  now = [0.0]

  class Terminal(io.StringIO):
    def isatty(self):
      return True

  for stream, interval in ((Terminal(), search_progress.TTY_INTERVAL),  # noqa: B007
                           (io.StringIO(), search_progress.LOG_INTERVAL)):
    now[0] = 0.0
    live = search_progress.SearchProgress(96_000, 10.0, stream, clock=lambda: now[0])
    live.compiling()
    now[0] = 3.0
    live.searching()
    for generation in range(40):  # A generation every 0.1 s: 4 s in all.
      now[0] = 3.0 + 0.1 * generation
      live.generation(generation, 200 * (generation + 1), 5000.0 - generation)
    live.close()
    text = stream.getvalue()
    shown = text.count("evaluations, best objective")
    # 4 s of generations: on a terminal about 4 / 0.2 rewrites, in a log the first line only.
    assert (15 <= shown <= 21) if interval == search_progress.TTY_INTERVAL else shown == 1
    assert "200 of 96,000 evaluations, best objective 5000, 0.0 s of 10 s" in text
    assert "preparing the search" in text
    assert ("\r\033[K" in text) == isinstance(stream, Terminal) and text.endswith("\n")


@pytest.mark.parametrize("config, reason", [
    (dict(evals=400), "budget"), (dict(evals=10 ** 8, time_limit=0.5), "time_limit")])
def test_the_result_says_why_the_search_stopped(config, reason):
  from regal_datasets import devices as devices_lib
  from regal_datasets.synthetic import sized_graph
  from regal.app import methods, optimize_lib, report
  # On 4 devices its best stays above the lower bound (on 2 it meets it: "bound").
  data = optimize_lib.run(sized_graph(30), devices_lib.homogeneous(4),
                          methods.RunConfig(**config)).result
  stopped = data.details["stopped"]
  assert stopped["reason"] == reason and stopped["budget"] == config["evals"]
  line = report.stop_line(stopped)
  assert line.startswith(report.search_progress.STOP_REASONS[reason])
  assert ("--time_limit 0.5 s" in line) == (reason == "time_limit")


def test_a_stop_asked_by_the_caller_is_its_stop_reason():
  """`should_stop` (the exact solver's proof beside the search) ends it at a generation
  boundary, and the result says so; a search left alone spends its budget."""
  from regal_datasets import devices as devices_lib
  from regal_datasets.synthetic import sized_graph
  from regal.scoring import performance
  from regal.search import brkga_search
  problem = performance.Problem(sized_graph(30), devices_lib.homogeneous(2))
  asked = []

  def proven() -> bool:
    asked.append(True)
    return len(asked) >= 3
  stopped = brkga_search.optimize(performance.Evaluator.of(problem), evals=10 ** 6,
                                  control=brkga_search.Control(should_stop=proven))
  assert stopped.stop_reason == "caller" and stopped.evaluations < 10 ** 6
  assert brkga_search.optimize(performance.Evaluator.of(problem), evals=500).stop_reason == "budget"


def test_the_last_lines_say_whether_the_programs_were_compiled_or_loaded():
  import io
  from regal.search import progress as search_progress
  said = []
  for compiled, kept in ((True, True), (False, True), (True, False)):
    stream = io.StringIO()
    live = search_progress.SearchProgress(1000, None, stream, shown=lambda v: f"{v:g} ms")
    live.finished(1000, 4.5, 0.25, 0.4, compiled, kept)
    said.append(stream.getvalue().splitlines())
  assert said[0][0] == "  1,000 of 1,000 evaluations, best objective 4.5 ms, 0.2 s"
  assert said[0][1] == ("  the search's programs were compiled (0.40 s; later runs of this size "
                        "load them)")
  assert said[1][1] == "  the search's programs were loaded from the cache (0.40 s)"
  assert "every run compiles it" in said[2][1]
