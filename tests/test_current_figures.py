"""docs/benchmarks.md opens with each benchmark's current figure: what its result file says."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("current_figures", ROOT / "benchmarks" / "current_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_current_figures_are_what_the_result_files_say():
    figures = _script()
    doc = figures.DOC.read_text()
    assert figures.rendered(doc) == doc, "run python benchmarks/current_figures.py"


def test_a_changed_result_shows_in_the_table(tmp_path, monkeypatch):
    figures = _script()
    first = figures.FIGURES[0]
    data = json.loads((ROOT / first.path).read_text())
    for row in data["rows"]:
        if row["measurement"] == "whole judge, baselines cached":
            row["value"] = 7.25
    (tmp_path / "latency.json").write_text(json.dumps(data))
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "FIGURES", [dataclasses.replace(first, path="latency.json")])
    assert "| **7.25 s** |" in figures.table()
