"""Tasks: KernelBench-format PyTorch programs to be made faster.

A task is Python source defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. Tasks load from a ``.py`` file, a directory of them (a KernelBench
``KernelBench/levelN/`` folder works as it is), a JSONL/Parquet dataset with a ``code`` column
(the CUDA-Agent-Ops-6K layout), or a SOL-ExecBench problem folder (``definition.json`` and
``workload.jsonl``, see ``sol_execbench``) or a folder of them. ``data.parquet:17`` selects one
row of a dataset.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import pysource
from .errors import TaskFormatError

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
DATASET_SUFFIXES = (".jsonl", ".parquet")


@dataclass(frozen=True)
class Task:
    """One reference program. ``source`` is the whole file; ``origin`` says where it came from."""

    name: str
    source: str
    origin: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def init_signature(self) -> pysource.InitSignature | None:
        tree = pysource.parse(self.source, self.origin)
        cls = pysource.top_level_class(tree, "Model")
        return pysource.init_signature(cls) if cls else None


def validate_task_source(source: str, origin: str) -> None:
    """Raise TaskFormatError naming ``origin`` when the source is not a KernelBench task."""
    try:
        tree = pysource.parse(source, origin)
    except SyntaxError as exc:
        raise TaskFormatError(f"task {exc}") from None
    missing = []
    if pysource.top_level_class(tree, "Model") is None:
        missing.append("`class Model(nn.Module)`")
    names = pysource.top_level_names(tree)
    missing += [f"`{fn}()`" for fn in REQUIRED_FUNCTIONS if fn not in names]
    if missing:
        raise TaskFormatError(
            f"task {origin} is not in KernelBench format: it defines no {', no '.join(missing)} "
            "at module level. A task defines class Model(nn.Module), get_inputs() and "
            "get_init_inputs()."
        )


def task_from_source(source: str, name: str, origin: str, metadata: dict | None = None) -> Task:
    validate_task_source(source, origin)
    return Task(name=name, source=source, origin=origin, metadata=dict(metadata or {}))


def natural_key(path: Path) -> tuple:
    """Sort '2_x.py' before '10_x.py', as KernelBench numbers its problems."""
    return tuple(int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", path.name))


def _load_py(path: Path) -> Task:
    try:
        source = path.read_text()
    except UnicodeDecodeError:
        raise TaskFormatError(f"task {path} is not UTF-8 text") from None
    # A workspace's or example's task is always model.py; its folder names it better.
    name = path.parent.name if path.stem == "model" and path.parent.name else path.stem
    return task_from_source(source, name, str(path))


def _dataset_rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".jsonl":
        with path.open() as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise TaskFormatError(f"{path}:{lineno}: each line must be a JSON object")
                yield row
    else:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise TaskFormatError(f"{path}: cannot read as Parquet ({exc})") from None
        if "code" not in table.column_names:
            raise TaskFormatError(
                f"{path}: a task dataset needs a `code` column; it has {table.column_names}"
            )
        yield from table.to_pylist()


def _dataset_task(path: Path, index: int, row: dict[str, Any]) -> Task:
    origin = f"{path}:{index}"
    code = row.get("code")
    if not isinstance(code, str):
        raise TaskFormatError(f"{origin}: row has no string `code` column (keys: {sorted(row)})")
    name = str(row.get("name") or row.get("id") or f"{path.stem}_{index:05d}")
    metadata = {k: v for k, v in row.items() if k != "code"}
    return task_from_source(code, name, origin, metadata)


def _split_row_selector(spec: str) -> tuple[Path, int | None]:
    match = re.fullmatch(r"(.+\.(?:jsonl|parquet)):(\d+)", spec)
    if match:
        return Path(match.group(1)), int(match.group(2))
    return Path(spec), None


def _load_directory(path: Path) -> list[Task]:
    """A SOL-ExecBench problem folder's task; else the folder's .py files; else the tasks of the
    SOL-ExecBench problem folders in it."""
    from . import sol_execbench  # it builds its tasks with this module's task_from_source

    if sol_execbench.is_problem(path):  # before its .py files: a problem folder may hold reference.py
        return [sol_execbench.load_problem(path)]
    files = sorted((p for p in path.glob("*.py") if not p.name.startswith("_")), key=natural_key)
    if files:
        return [_load_py(p) for p in files]
    problems = sol_execbench.problem_folders(path)
    if problems:
        return [sol_execbench.load_problem(p) for p in problems]
    raise TaskFormatError(f"task directory {path} holds no .py task files, and no SOL-ExecBench problem "
                          f"folders (each with a {sol_execbench.DEFINITION_FILE})")


def load_tasks(spec: str | Path) -> list[Task]:
    """All tasks at ``spec``: a .py file, a directory of .py files, a JSONL/Parquet dataset, or a
    SOL-ExecBench problem folder or a folder of them."""
    path, row = _split_row_selector(str(spec))
    if not path.exists():
        raise TaskFormatError(f"task path {path} does not exist")
    if path.is_dir():
        return _load_directory(path)
    if path.suffix in DATASET_SUFFIXES:
        tasks = []
        for index, data in enumerate(_dataset_rows(path)):
            if row is None or index == row:
                tasks.append(_dataset_task(path, index, data))
        if row is not None and not tasks:
            raise TaskFormatError(f"{path} has no row {row}")
        if not tasks:
            raise TaskFormatError(f"dataset {path} holds no rows")
        return tasks
    if path.suffix == ".py":
        return [_load_py(path)]
    raise TaskFormatError(
        f"cannot load tasks from {path}: expected a .py file, a directory of them, "
        "a .jsonl/.parquet dataset with a `code` column, or a SOL-ExecBench problem folder"
    )


def load_task(spec: str | Path) -> Task:
    """Exactly one task: a .py file, ``dataset.jsonl:N`` / ``dataset.parquet:N``, or a
    SOL-ExecBench problem folder."""
    tasks = load_tasks(spec)
    if len(tasks) != 1:
        raise TaskFormatError(
            f"{spec} holds {len(tasks)} tasks; name one file, one dataset row as PATH:N, or one "
            "SOL-ExecBench problem folder"
        )
    return tasks[0]
