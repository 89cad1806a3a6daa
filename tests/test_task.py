"""Loading KernelBench-format tasks from files, folders and datasets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cuda_agent.errors import CudaAgentError, TaskFormatError
from cuda_agent.task import Task, load_task, load_tasks, task_from_source

FIXTURE_TASK = Path(__file__).resolve().parent / "fixtures" / "tasks" / "scale_bias_relu.py"


def task_source(op: str = "x + 1", init: str = "") -> str:
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{", " + init if init else ""}):
        super().__init__()

    def forward(self, x):
        return {op}


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
'''


def test_load_a_py_file():
    task = load_task(FIXTURE_TASK)
    assert isinstance(task, Task)
    assert task.name == "scale_bias_relu"
    assert task.origin == str(FIXTURE_TASK)
    assert task.source == FIXTURE_TASK.read_text()
    assert len(task.sha256) == 64
    assert task.init_signature().names == ("features", "scale")


def test_sha256_follows_the_source():
    a = task_from_source(task_source("x + 1"), "a", "a.py")
    b = task_from_source(task_source("x + 2"), "a", "a.py")
    assert a.sha256 != b.sha256
    assert a.sha256 == task_from_source(task_source("x + 1"), "other", "other.py").sha256


def test_directory_is_loaded_in_natural_order(tmp_path):
    for name in ("10_ten.py", "2_two.py", "1_one.py", "_helper.py"):
        (tmp_path / name).write_text(task_source())
    (tmp_path / "notes.txt").write_text("not a task")
    tasks = load_tasks(tmp_path)
    assert [t.name for t in tasks] == ["1_one", "2_two", "10_ten"]


def test_empty_directory_is_an_error(tmp_path):
    with pytest.raises(TaskFormatError, match="holds no .py task files"):
        load_tasks(tmp_path)


def test_load_task_wants_exactly_one(tmp_path):
    for name in ("1_a.py", "2_b.py"):
        (tmp_path / name).write_text(task_source())
    with pytest.raises(TaskFormatError, match="holds 2 tasks"):
        load_task(tmp_path)


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_jsonl_dataset_with_metadata(tmp_path):
    rows = [{"code": task_source("x + 1"), "ops": ["add"], "data_source": "synth"},
            {"code": task_source("x * 2"), "ops": ["mul"], "data_source": "synth", "name": "double"}]
    path = _write_jsonl(tmp_path / "ops.jsonl", rows)
    tasks = load_tasks(path)
    assert [t.name for t in tasks] == ["ops_00000", "double"]
    assert tasks[0].metadata == {"ops": ["add"], "data_source": "synth"}
    assert tasks[1].origin == f"{path}:1"
    assert "x * 2" in tasks[1].source


def test_jsonl_row_selector(tmp_path):
    rows = [{"code": task_source(f"x + {i}")} for i in range(3)]
    path = _write_jsonl(tmp_path / "ops.jsonl", rows)
    task = load_task(f"{path}:2")
    assert "x + 2" in task.source and task.origin == f"{path}:2"
    with pytest.raises(TaskFormatError, match="has no row 7"):
        load_task(f"{path}:7")


def test_parquet_dataset_and_row_selector(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"code": [task_source("x + 1"), task_source("x - 1")],
                      "ops": [["add"], ["sub"]], "data_source": ["a", "b"]})
    path = tmp_path / "ops.parquet"
    pq.write_table(table, path)
    tasks = load_tasks(path)
    assert len(tasks) == 2 and tasks[1].metadata["ops"] == ["sub"]
    assert "x - 1" in load_task(f"{path}:1").source


def test_parquet_without_code_column_names_the_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "nocode.parquet"
    pq.write_table(pa.table({"source": [task_source()]}), path)
    with pytest.raises(TaskFormatError, match="needs a `code` column") as info:
        load_tasks(path)
    assert str(path) in str(info.value)


def test_jsonl_row_without_code_names_the_row(tmp_path):
    path = _write_jsonl(tmp_path / "bad.jsonl", [{"code": task_source()}, {"source": "x"}])
    with pytest.raises(TaskFormatError, match="no string `code` column") as info:
        load_tasks(path)
    assert f"{path}:1" in str(info.value)


def test_jsonl_with_broken_json_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"code": task_source()}) + "\n{not json\n")
    with pytest.raises(TaskFormatError, match=r"broken\.jsonl:2: not valid JSON"):
        load_tasks(path)


def test_missing_model_names_the_file(tmp_path):
    path = tmp_path / "nomodel.py"
    path.write_text(task_source().replace("class Model(", "class Net("))
    with pytest.raises(TaskFormatError) as info:
        load_task(path)
    message = str(info.value)
    assert str(path) in message and "`class Model(nn.Module)`" in message
    assert "`get_inputs()`" not in message and "`get_init_inputs()`" not in message


def test_missing_get_inputs_names_the_file(tmp_path):
    path = tmp_path / "noinputs.py"
    path.write_text(task_source().replace("def get_inputs", "def make_inputs"))
    with pytest.raises(TaskFormatError, match=r"no `get_inputs\(\)`") as info:
        load_task(path)
    assert str(path) in str(info.value)


def test_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\n\nclass Model(nn.Module:\n    pass\n")
    with pytest.raises(TaskFormatError, match=re.escape(f"{path}:3: ")) as info:
        load_task(path)
    assert isinstance(info.value, CudaAgentError)


def test_nonexistent_path(tmp_path):
    with pytest.raises(TaskFormatError, match="does not exist"):
        load_task(tmp_path / "nothere.py")
    with pytest.raises(TaskFormatError, match="does not exist"):
        load_task(f"{tmp_path / 'nothere.jsonl'}:3")


def test_unknown_file_type(tmp_path):
    path = tmp_path / "task.txt"
    path.write_text(task_source())
    with pytest.raises(TaskFormatError, match="expected a .py file"):
        load_tasks(path)


def test_non_utf8_task(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# \xff\xfe\n" + task_source().encode())
    with pytest.raises(TaskFormatError, match="not UTF-8"):
        load_task(path)
