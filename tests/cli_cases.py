"""Runs many command lines of one absl CLI module in one process (the test suite's bad-input
table): `python tests/cli_cases.py MODULE < cases.json` prints, per case id, the exit code and
what the case printed. Each case parses its flags afresh and runs `main` through
`cli.run_cli`, exactly as `python -m MODULE ARGS` would, without paying for an interpreter
and JAX per case."""
import contextlib
import importlib
import io
import json
import os
import sys


def main() -> None:
  module_name = sys.argv[1]
  cases = json.load(sys.stdin)
  module = importlib.import_module(module_name)
  from absl import flags

  from regal_datasets import cli
  results = {}
  for case in cases:
    flags.FLAGS.unparse_flags()
    sys.argv = [module_name, *case["args"]]  # ml_collections reads config overrides here.
    os.chdir(case["cwd"])
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      try:
        cli.run_cli(module.main, [module_name, *case["args"]])
      except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
      except BaseException:  # What a user would see as a traceback: the test shows it.
        import traceback
        code, err = -1, io.StringIO(traceback.format_exc())
    results[case["id"]] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
  print(json.dumps(results))


if __name__ == "__main__":
  main()
