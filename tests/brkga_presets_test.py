"""BRKGA presets: saved by the tuning sweep, read by regal.optimize and regal.train."""
import json

import numpy as np
import pytest

import regal_brkga as brkga
from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal.app import methods, optimize_lib
from regal.learning import workdir as workdir_lib
from regal.learning.configs import default as default_config
from regal.scoring import performance
from regal.search import brkga_presets, brkga_search

SETTING = {"population_size": 40, "elite_fraction": 0.2, "mutant_fraction": 0.1,
           "num_populations": 2, "rho": 0.6, "mutant_alpha": 2.0, "mutant_beta": 0.5}


@pytest.fixture
def presets_file(tmp_path, monkeypatch):
  path = tmp_path / "presets.json"
  monkeypatch.setattr(brkga_presets, "PRESETS_FILE", str(path))
  return path


def test_a_saved_preset_reads_back_as_parameters(presets_file):
  assert brkga_presets.names() == ["default"]
  brkga_presets.save("tuned", {**SETTING, "extra": 1}, {"command": "c", "date": "d"})
  assert json.loads(presets_file.read_text())["tuned"]["provenance"] == {"command": "c",
                                                                          "date": "d"}
  assert brkga_presets.names() == ["default", "tuned"]
  params = brkga_presets.params("tuned", num_genes=500)
  assert (params.population_size, params.num_elites, params.num_mutants,
          params.num_populations, params.exchange_interval) == (40, 8, 4, 2, 20)
  assert (float(params.rho), float(params.mutant_alpha), float(params.mutant_beta)) == (
      0.6, 2.0, 0.5)
  assert brkga_presets.params("default", 60) == brkga.goncalves_resende(60).replace(
      restart_patience=brkga_search.RESTART_PATIENCE)


def test_bad_presets_are_one_line_errors(presets_file):
  with pytest.raises(errors.ConfigError, match="unknown BRKGA preset 'nope'; known: default"):
    brkga_presets.params("nope", 10)
  with pytest.raises(errors.ConfigError, match="reserved"):
    brkga_presets.save("default", SETTING, {})
  with pytest.raises(errors.ConfigError, match="num_elites"):
    brkga_presets.save("bad", {**SETTING, "elite_fraction": 1.0}, {})
  presets_file.write_text("{not json")
  with pytest.raises(errors.ConfigError, match="cannot read BRKGA presets"):
    brkga_presets.names()
  presets_file.write_text(json.dumps({"short": {"setting": {"rho": 0.7}}}))
  with pytest.raises(errors.ConfigError, match="lacks population_size"):
    brkga_presets.setting("short")


def test_optimize_uses_the_preset_and_refuses_it_for_other_methods(presets_file):
  brkga_presets.save("tuned", SETTING, {})
  graph = synthetic.generate(np.random.default_rng(0), synthetic.SyntheticSpec(
      min_nodes=12, max_nodes=12))
  devices = devices_lib.homogeneous(2)
  report = optimize_lib.run(graph, devices,
                            methods.RunConfig(model="sync", evals=400,
                                              brkga=methods.BrkgaOptions(preset="tuned")))
  settings = report.result.settings["brkga"]
  assert settings["preset"] == "tuned" and settings["population_size"] == 40
  assert settings["num_populations"] == 2 and settings["mutant_alpha"] == 2.0
  with pytest.raises(errors.ConfigError, match="use it with --method brkga"):
    optimize_lib.run(graph, devices,
                     methods.RunConfig(model="sync", method="gp_dfs",
                                       brkga=methods.BrkgaOptions(preset="tuned")))


def test_unguided_searches_take_the_presets_betas(presets_file):
  """The one search reads a preset's mutant Betas when no guide gives its own: the same
  search as a guide giving those Betas gene by gene."""
  from regal.search import guides
  graph = synthetic.generate(np.random.default_rng(1), synthetic.SyntheticSpec(
      min_nodes=10, max_nodes=10))
  problem = performance.Problem(graph, devices_lib.homogeneous(2), model="sync")
  brkga_presets.save("tuned", SETTING, {})
  size = problem.layout.size
  tuned = guides.plan_search(problem, 600, "tuned")
  implicit = guides.run_guided(problem, 600, 3, guides.Guidance(), tuned)
  explicit = guides.run_guided(problem, 600, 3, guides.Guidance(
      mutant_alpha=np.full(size, SETTING["mutant_alpha"]),
      mutant_beta=np.full(size, SETTING["mutant_beta"])), tuned)
  uniform = guides.run_guided(problem, 600, 3, guides.Guidance(),
                              guides.plan_search(problem, 600, "default"))
  np.testing.assert_array_equal(implicit.history, explicit.history)
  assert not np.array_equal(implicit.history, uniform.history)


def test_a_training_fingerprint_holds_every_setting_and_the_presets_values(presets_file):
  """A checkpoint matches its config: changing any setting but the run-length ones changes
  the fingerprint, and so does re-tuning the preset it names."""
  config = default_config.get_config()
  before = workdir_lib.fingerprint(config)
  config.reward = "measured"
  assert workdir_lib.fingerprint(config) != before
  config.reward = "model"
  config.num_steps += 1  # Run length: the same workdir goes on.
  assert workdir_lib.fingerprint(config) == before
  brkga_presets.save("tuned", SETTING, {})
  config.brkga_preset = "tuned"
  tuned = workdir_lib.fingerprint(config)
  brkga_presets.save("tuned", {**SETTING, "rho": 0.7}, {})  # Re-tuned: another workdir.
  assert len({before, tuned, workdir_lib.fingerprint(config)}) == 3


def test_the_default_preset_holds_search_settings_with_provenance(presets_file):
  from regal import search
  assert brkga_presets.search_settings("default") == search.SearchSettings()
  with pytest.raises(errors.ConfigError, match="reserved for search settings"):
    brkga_presets.save("default", SETTING, {})
  brkga_presets.save("default", {"decoder": "list", "climbers": 3, "improve_interval": 2},
                     {"command": "sweep", "date": "d"})
  stored = json.loads(presets_file.read_text())["default"]
  assert stored == {"setting": {"decoder": "list", "climbers": 3, "improve_interval": 2},
                    "provenance": {"command": "sweep", "date": "d"}}
  settings = brkga_presets.search_settings("default")
  assert (settings.decoder, settings.memetic.climbers, settings.memetic.interval) == (
      "list", 3, 2)
  assert settings.memetic.steps == search.Memetic().steps  # Unsaved keys: built-in values.
  assert brkga_presets.params("default", 60) == brkga.goncalves_resende(60).replace(
      restart_patience=brkga_search.RESTART_PATIENCE)
  assert brkga_presets.names() == ["default"]
  # Other presets inherit the default's search settings unless they set their own, and the
  # flag overrides the decoder.
  brkga_presets.save("tuned", {**SETTING, "climbers": 0}, {})
  tuned = brkga_presets.search_settings("tuned")
  assert (tuned.decoder, tuned.memetic.climbers) == ("list", 0)
  assert brkga_presets.search_settings("tuned", decoder="direct").decoder == "direct"
  brkga_presets.save("default", {"decoder": {"doppler": "list", "sync": "direct"},
                                 "climbers": {"doppler": 4}}, {})
  assert brkga_presets.search_settings("default", model="doppler").decoder == "list"
  assert brkga_presets.search_settings("default", model="doppler").memetic.climbers == 4
  assert brkga_presets.search_settings("default", model="wc").memetic.climbers == 0
  assert brkga_presets.search_settings("default", model="sync").decoder == "direct"
  assert brkga_presets.search_settings("default", model="delay").decoder == "direct"
  brkga_presets.save("default", {"decoder": "spiral"}, {})
  with pytest.raises(errors.ConfigError, match="unknown decoder 'spiral'"):
    brkga_presets.search_settings("default")
