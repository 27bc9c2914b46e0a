"""The typed result (`regal.app.result.Result`): a run's result file reads back into the same
result, its keys are the fields in order (the schema), and docs/reference.md documents exactly
the generated schema."""
import dataclasses
import json

import numpy as np
import pytest
from conftest import REPO_ROOT

from regal_datasets import devices as devices_lib
from regal_datasets import synthetic
from regal.app import methods, optimize_lib
from regal.app import report as report_lib
from regal.app import result as result_lib


def test_a_result_file_reads_back_and_its_keys_are_the_schema(tmp_path):
  graph = synthetic.generate(np.random.default_rng(2),
                             synthetic.SyntheticSpec(min_nodes=10, max_nodes=10))
  report = optimize_lib.run(graph, devices_lib.homogeneous(2),
                            methods.RunConfig(method="critical_path"))
  path = tmp_path / "r.json"
  report_lib.write_json(report, str(path))
  data = json.loads(path.read_text())
  fields = [f.name for f in dataclasses.fields(result_lib.Result)]
  assert list(data) == ["format", "version"] + [f for f in fields
                                                if f not in ("memory_excess", "execution")]
  back = result_lib.Result.from_json(data)
  assert back == report.result and back.objective == report.result.objective
  assert report.data == data  # The dict view is the file's object.
  with pytest.raises(ValueError, match="not a regal.result version 1"):
    result_lib.Result.from_json({**data, "version": 2})


def test_the_documented_schemas_are_the_generated_ones():
  text = (REPO_ROOT / "docs" / "reference.md").read_text()
  for kind in (result_lib.Result, result_lib.SplitResult):
    assert "\n".join(kind.schema_markdown()) in text, kind.__name__
