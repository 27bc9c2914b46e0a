"""`regal_brkga.programs.Program`: the answers of `jax.jit`, bit for bit; a later process loads the
kept executable without tracing it again; an entry that cannot be read is compiled and
written again; and a program JAX's own cache served is never kept (an executable JAX loaded
does not serialize whole, and its copy failed to run)."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from regal_brkga import programs

STEP = """
import collections, json, os, sys
import jax, jax.numpy as jnp, numpy as np
from regal_brkga import programs

def step(key, x, rows):
  noise = jax.random.uniform(key, (rows, x.shape[-1]))
  return jnp.sort(x[:rows] * noise, axis=0), jnp.argmax(noise, axis=1)

key = jax.block_until_ready(jax.random.key(3))  # Its own small program, before listening.
events = collections.Counter()
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **_: events.update([event]))
program = programs.Program(step, static_argnums=(2,), packages=("regal_brkga",))
out = program(key, np.arange(40, dtype=np.float32).reshape(8, 5), 6)
print(json.dumps({"values": np.asarray(out[0]).tolist(), "index": np.asarray(out[1]).tolist(),
                  "traced": events["/jax/core/compile/jaxpr_trace_duration"],
                  "loaded": events[programs.LOADED]}))
"""


def _step(key, x, rows):
  noise = jax.random.uniform(key, (rows, x.shape[-1]))
  return jnp.sort(x[:rows] * noise, axis=0), jnp.argmax(noise, axis=1)


def test_a_program_answers_as_jit_does(monkeypatch, tmp_path):
  monkeypatch.setenv(programs.CACHE_ENV, str(tmp_path))
  program = programs.Program(_step, static_argnums=(2,))
  x = np.arange(40, dtype=np.float32).reshape(8, 5)
  for rows in (3, 6, 3):  # A new static value is a new executable; an old one is reused.
    got = program(jax.random.key(1), x, rows)
    want = jax.jit(_step, static_argnums=2)(jax.random.key(1), x, rows)
    for a, b in zip(got, want):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert len(program._compiled) == 2 and len(os.listdir(tmp_path)) == 2


def _run(folder, jax_cache=None):
  import json
  env = {name: value for name, value in os.environ.items()
         if name not in ("JAX_COMPILATION_CACHE_DIR", programs.CACHE_ENV)}
  env[programs.CACHE_ENV] = str(folder)
  if jax_cache is not None:
    env.update(JAX_COMPILATION_CACHE_DIR=str(jax_cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
  done = subprocess.run([sys.executable, "-c", STEP], capture_output=True, text=True, env=env,
                        timeout=120)
  assert done.returncode == 0, done.stderr[-2000:]
  return json.loads(done.stdout.splitlines()[-1])


def test_a_later_process_loads_the_program_without_tracing_it(tmp_path):
  first = _run(tmp_path)
  assert first["traced"] >= 1 and first["loaded"] == 0
  second = _run(tmp_path)
  assert second["traced"] == 0 and second["loaded"] == 1
  assert second["values"] == first["values"] and second["index"] == first["index"]
  (entry,) = os.listdir(tmp_path)
  (tmp_path / entry).write_bytes(b"half an entry")  # Unreadable: compiled and written again.
  third = _run(tmp_path)
  assert third["traced"] >= 1 and third["values"] == first["values"]
  assert _run(tmp_path)["loaded"] == 1


def test_a_program_that_jax_cache_served_runs_and_is_not_kept(tmp_path):
  folder, jax_cache = tmp_path / "programs", tmp_path / "jax"
  first = _run(folder, jax_cache)  # Compiled: kept here and in JAX's cache.
  for entry in os.listdir(folder):
    os.remove(folder / entry)
  for _ in range(2):  # JAX's cache serves it now: it runs, and nothing is kept from it.
    again = _run(folder, jax_cache)
    assert again["values"] == first["values"] and again["index"] == first["index"]
    assert os.listdir(folder) == []
