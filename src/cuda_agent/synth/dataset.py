"""Accepted tasks as a dataset: one row per task, written as Parquet and JSONL.

The first three columns are CUDA-Agent-Ops-6K's (``code``, ``ops``, ``data_source``), so anything
that reads that dataset reads ours; the rest is our metadata. Layout of a dataset folder::

    out_dir/
      README.md            dataset card (``card.write_card``); its YAML ``configs`` block names
                           data/train.parquet as the only data file of the train split
      stats.json, *.png    the card's statistics and plots
      data/train.parquet   the dataset
      data/train.jsonl     the same rows, one JSON object a line, for tools without Parquet

``datasets.load_dataset(str(out_dir))`` reads only data/train.parquet: through the card's
``configs`` block, and, without a card, because a file named ``train`` in ``data/`` selects the
train split and Parquet wins the tie between the two formats there. The PNGs and stats.json are
not data files either way. ``datasets`` refuses to load a split with no rows, so a run that
accepted nothing still writes both files (readable with :func:`load_rows` or pyarrow) but cannot
be loaded through ``datasets``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..files import write_atomic
from .records import Outcome

# Explicit types, so that an empty dataset, or a column that is null in every row, is still typed.
SCHEMA = pa.schema([
    ("code", pa.string()),
    ("ops", pa.list_(pa.string())),
    ("data_source", pa.string()),
    ("id", pa.string()),
    ("n_ops", pa.int64()),
    ("composer", pa.string()),
    ("eager_ms", pa.float64()),
    ("compile_ms", pa.float64()),
    ("estimate_ms", pa.float64()),
    ("input_shapes", pa.list_(pa.list_(pa.int64()))),
    ("output_shape", pa.list_(pa.int64())),
    ("max_kernelbench_similarity", pa.float64()),
    ("most_similar_kernelbench", pa.string()),
    ("device", pa.string()),
    ("filters", pa.string()),
])
COLUMNS = tuple(SCHEMA.names)

COLUMN_DESCRIPTIONS = {
    "code": "the task: a KernelBench-format program (class Model, get_inputs, get_init_inputs)",
    "ops": "the operators it is composed of, in order",
    "data_source": '"torch#<number of ops>" or "transformers#1", as in CUDA-Agent-Ops-6K',
    "id": "task id, unique within this dataset",
    "n_ops": "number of operators (length of ops)",
    "composer": '"offline" or "llm:<model>": what composed the task',
    "eager_ms": "median eager time on the run's device, ms (null if not measured)",
    "compile_ms": "median time of the torch.compile-d model on the run's device, ms (null if not measured)",
    "estimate_ms": "roofline estimate of the eager time on the target GPU, ms (null if not sized)",
    "input_shapes": "shapes of the tensors get_inputs() returns",
    "output_shape": "shape of the output (null if not a single tensor or not known)",
    "max_kernelbench_similarity": "highest AST similarity to any KernelBench problem "
                                  "(null without a KernelBench checkout)",
    "most_similar_kernelbench": "the KernelBench problem with that similarity",
    "device": "the device the filters ran on",
    "filters": 'JSON object {filter: {"passed": bool, "measurement": {...}}} in the order '
               "the filters ran; non-finite numbers appear as the strings \"nan\", \"inf\", "
               "\"-inf\"",
}

PARQUET = Path("data") / "train.parquet"
FILE_MODE = 0o644  # files meant to be shared: readable by all (temporary files start private)
JSONL = Path("data") / "train.jsonl"


def _number(x: float | None) -> float | None:
    """A column value: non-finite numbers become null, which both formats can hold."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def json_safe(value: Any) -> Any:
    """A measurement as strict JSON: non-finite floats become strings, tuples become lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def task_row(outcome: Outcome, task_id: str) -> dict[str, Any]:
    """One dataset row for an outcome: the CUDA-Agent-Ops-6K columns, then our metadata."""
    c = outcome.candidate
    filters = {f.name: {"passed": bool(f.passed), "measurement": json_safe(f.measurement)}
               for f in outcome.filters}
    return {
        "code": c.code,
        "ops": [str(op) for op in c.ops],
        "data_source": c.data_source,
        "id": str(task_id),
        "n_ops": len(c.ops),
        "composer": c.composer,
        "eager_ms": _number(outcome.eager_ms),
        "compile_ms": _number(outcome.compile_ms),
        "estimate_ms": _number(c.estimate_ms),
        "input_shapes": [[int(d) for d in shape] for shape in c.input_shapes],
        "output_shape": None if c.output_shape is None else [int(d) for d in c.output_shape],
        "max_kernelbench_similarity": _number(outcome.max_similarity),
        "most_similar_kernelbench": outcome.most_similar,
        "device": outcome.device,
        "filters": json.dumps(filters, allow_nan=False, default=str),
    }


def _check(rows: list[dict]) -> None:
    for i, row in enumerate(rows):
        if set(row) != set(COLUMNS):
            missing = sorted(set(COLUMNS) - set(row))
            extra = sorted(set(row) - set(COLUMNS))
            raise ValueError(f"row {i}: missing columns {missing}, unknown columns {extra}")


def _write_parquet(table: pa.Table, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    os.close(fd)
    try:
        if table.num_rows:
            pq.write_table(table, tmp)
        else:
            # No row group at all: an empty row group makes readers ask for batches of 0 rows.
            pq.ParquetWriter(tmp, table.schema).close()
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_dataset(rows: list[dict], out_dir: Path) -> dict[str, Path]:
    """Write ``out_dir/data/train.parquet`` and ``out_dir/data/train.jsonl``, each atomically.

    Rows must have exactly the columns of :data:`SCHEMA`.
    Returns ``{"parquet": ..., "jsonl": ...}``.
    """
    _check(rows)
    out_dir = Path(out_dir)
    paths = {"parquet": out_dir / PARQUET, "jsonl": out_dir / JSONL}
    paths["parquet"].parent.mkdir(parents=True, exist_ok=True)
    _write_parquet(pa.Table.from_pylist(rows, schema=SCHEMA), paths["parquet"])
    lines = "".join(json.dumps({k: row[k] for k in COLUMNS}, ensure_ascii=False, allow_nan=False)
                    + "\n" for row in rows)
    write_atomic(paths["jsonl"], lines.encode("utf-8"), mode=FILE_MODE)
    return paths


def load_rows(path: Path | str) -> list[dict]:
    """Rows from a ``.parquet`` or ``.jsonl`` file, or from a dataset folder (its Parquet file)."""
    path = Path(path)
    if path.is_dir():
        path = path / PARQUET
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    if path.suffix in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    raise ValueError(f"{path}: expected a .parquet or .jsonl file, or a dataset folder")
