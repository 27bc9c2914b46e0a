"""Shared fixtures: where the reference graphs live, and a hypothesis profile for CI."""
import os
import pathlib
import shutil

import hypothesis
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_GRAPHS = REPO_ROOT.parent / "shared" / "graphs"

hypothesis.settings.register_profile("default", deadline=None, max_examples=50)

# The compilation cache this session made (None: the caller named one, or another process of
# the session made it: xdist's workers and CLI subprocesses inherit the environment).
_OWN_CACHE: str | None = None


def pytest_configure(config):
  """One persistent JAX compilation cache per test session, every compile kept: tests that
  rebuild the same program (a search on the same bucket, training resumed in the same
  workdir, CLI subprocesses, which inherit the environment) compile it once."""
  import tempfile

  import jax
  global _OWN_CACHE
  if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _OWN_CACHE = tempfile.mkdtemp(prefix="regal-test-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
  cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
  # The host search's kept executables (`regal_brkga.programs`) beside it, not in the user's.
  os.environ.setdefault("REGAL_PROGRAM_CACHE", os.path.join(cache, "programs"))
  min_seconds = os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  # XLA without its costly optimization passes, as JAX's own test suite compiles: the
  # suite's programs are tiny, so the passes cost seconds per compile and save microseconds
  # per run. Results stay bit for bit (the golden test and every model-versus-reference test
  # compare exactly); `JAX_DISABLE_MOST_OPTIMIZATIONS=0` runs the suite fully optimized.
  fast_compile = os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
  # Two host devices, as `regal.optimize` has on a 2-core machine; the executor's tests
  # place ops on both.
  jax.config.update("jax_num_cpu_devices", 2)
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_seconds))
  jax.config.update("jax_disable_most_optimizations", fast_compile not in ("0", "false"))


def pytest_unconfigure(config):
  """The session's own compilation cache goes at its end (~20 MB a run); one the caller named
  stays."""
  if _OWN_CACHE is not None:
    shutil.rmtree(_OWN_CACHE, ignore_errors=True)


hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def shared_graphs() -> pathlib.Path:
  if not SHARED_GRAPHS.is_dir():
    pytest.skip(f"reference graphs not found at {SHARED_GRAPHS} (../shared/graphs beside the "
                f"repository); these tests need them")
  return SHARED_GRAPHS


@pytest.fixture(scope="session")
def golden_training(tmp_path_factory):
  """(workdir, report) of the `:test` preset's 2-step REGAL training on the synthetic
  generator, run once per session: the golden test pins it bit for bit, and the training test
  goes on from a copy of its workdir (resume, kills, the policy in regal.optimize)."""
  from regal.learning import train_lib
  from regal.learning.configs import default as default_config
  workdir = str(tmp_path_factory.mktemp("golden_training") / "run")
  config = default_config.get_config("test")
  config.learner = "mutants"
  report = train_lib.train_and_evaluate(config, workdir)
  return workdir, report


@pytest.fixture(scope="session")
def ray_cluster():
  """One local Ray cluster (2 CPUs) for every test that needs one: starting Ray costs
  seconds."""
  ray = pytest.importorskip("ray")
  ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
  yield ray
  ray.shutdown()


# Modules that share a session fixture (the golden training run, the Ray cluster): one worker
# runs them all, so the fixture is built once.
_SHARED_SESSION = {"golden_test": "training", "train_test": "training", "sweep_test": "training"}


# The groups that take longest (minutes on two cores) start first, so no worker is left
# alone with one of them at the end; the rest keep their order.
_LONGEST_FIRST = ("training", "golden_methods", "bad_input_test", "execute_test", "jax_models_test",
                  "memetic_test", "doppler_test", "optimize_test", "policy_test", "guides_test")


def _group(item) -> str:
  module = item.module.__name__.rsplit(".", 1)[-1]
  if module == "golden_test" and "golden_training" not in item.fixturenames:
    return "golden_methods"  # The golden searches need no training run: another worker.
  return _SHARED_SESSION.get(module, module)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Under pytest-xdist (`-n 2 --dist loadgroup`, the README's command) each test module runs
  whole on one worker, so its module fixtures and compiled programs are built once; before
  xdist reads the groups (`tryfirst`). Groups are handed out in collection order
  (`--no-loadscope-reorder`), the longest first."""
  rank = {group: k for k, group in enumerate(_LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(_group(item), len(rank)))  # Stable: the rest in order.
  for item in items:
    item.add_marker(pytest.mark.xdist_group(_group(item)))
