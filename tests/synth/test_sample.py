"""The committed sample of synthesised tasks: loadable, well-formed, and every filter passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.synth.dataset import load_rows
from cuda_agent.synth.records import FILTERS
from cuda_agent.task import load_tasks

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "synth"


@pytest.mark.parametrize("name", ["sample.jsonl", "sample.parquet"])
def test_sample_loads_as_tasks(name):
    tasks = load_tasks(SAMPLE / name)
    assert len(tasks) == 50 and len({t.sha256 for t in tasks}) == 50


def test_every_sample_row_passed_every_filter_in_the_window():
    rows = load_rows(SAMPLE / "sample.parquet")
    assert load_rows(SAMPLE / "sample.jsonl") == rows
    kinds = {r["data_source"] for r in rows}
    assert {"torch#1", "torch#2", "torch#3", "torch#4", "torch#5", "transformers#1"} <= kinds
    for row in rows:
        filters = json.loads(row["filters"])
        assert list(filters) == list(FILTERS) and all(f["passed"] for f in filters.values())
        assert 1.0 <= row["eager_ms"] <= 100.0 and row["device"] == "cuda"
        assert row["max_kernelbench_similarity"] <= 0.9
        assert row["n_ops"] == len(row["ops"])
        if row["data_source"].startswith("torch#"):
            assert row["data_source"] == f"torch#{len(row['ops'])}"
