"""Each execution filter, on real tasks made to fail it, run on the CPU as the pipeline runs them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.synth import filters
from cuda_agent.synth.filters import FilterSettings
from cuda_agent.synth.probe import ProbeSettings, check_candidate, init_worker
from cuda_agent.synth.records import FILTERS, Candidate

KERNELBENCH = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
FOOTER = """

def get_inputs():
    return [torch.randn(8, 16, 32)]


def get_init_inputs():
    return []
"""


def task(forward: str, init: str = "") -> str:
    return (HEADER + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + "".join(f"        {line}\n" for line in init.splitlines())
            + "\n    def forward(self, x):\n"
            + "".join(f"        {line}\n" for line in forward.splitlines()) + FOOTER)


GOOD = task("x = self.linear(x)\nreturn torch.tanh(x)", "self.linear = nn.Linear(32, 64)")


def run(code: str, window=(1e-4, 10.0), kernelbench: Path | None = None) -> dict:
    settings = ProbeSettings(device="cpu", filters=FilterSettings(window_ms=window),
                             kernelbench=str(kernelbench) if kernelbench else None).to_dict()
    init_worker(settings)
    candidate = Candidate(index=0, code=code, ops=["test"], data_source="torch#1", composer="test")
    return check_candidate(candidate.to_dict(), settings)


def failing(report: dict) -> tuple[str, dict]:
    last = report["filters"][-1]
    assert not last["passed"], f"expected a failure, got {report['filters']}"
    assert all(f["passed"] for f in report["filters"][:-1])
    return last["name"], last


@pytest.mark.slow
def test_a_good_task_passes_every_execution_filter_including_compile():
    report = run(GOOD)
    names = [f["name"] for f in report["filters"]]
    assert names == list(FILTERS[2:])  # the static two run in the parent
    assert all(f["passed"] for f in report["filters"]), report["filters"]
    assert report["eager_ms"] > 0 and report["compile_ms"] > 0
    assert report["estimate"]["ms"] > 0 and report["estimate"]["flops"] == 2 * 8 * 16 * 32 * 64
    compiled = report["filters"][-1]["measurement"]
    assert compiled["compile_s"] > 0 and compiled["max_abs_diff"] < 1e-3


def test_random_op_in_forward_fails_the_rerun():
    name, result = failing(run(task("return x + torch.randn_like(x)")))
    assert name == "deterministic_runs" and result["measurement"]["max_abs_diff"] > 0.1


def test_constant_output_fails():
    name, result = failing(run(task("return torch.zeros_like(x) + 3.0")))
    assert name == "not_constant" and result["measurement"]["constant_outputs"] == [0]


def test_input_independent_output_fails():
    code = task("return self.w * 1.0 + 0.0 * x.mean()", "self.w = nn.Parameter(torch.randn(8, 16, 32))")
    name, result = failing(run(code))
    assert name == "input_dependent" and result["measurement"]["max_abs_diff"] < 1e-6


def test_saturated_output_is_indistinguishable_within_the_judges_tolerance():
    # Not constant (it varies by ~1e-4), but any input gives an output within 1e-2 of any other:
    # one fixed output would pass the judge's checks.
    name, result = failing(run(task("return torch.tanh(x * 1e-3 + 2.0)")))
    assert name == "input_dependent" and 0 < result["measurement"]["max_abs_diff"] < 1e-2


def test_nan_output_fails():
    name, result = failing(run(task("return torch.log(-x.abs() - 1.0)")))
    assert name == "finite" and result["measurement"]["nan"] == 8 * 16 * 32


def test_task_that_does_not_run_fails_eager():
    name, result = failing(run(task("return x @ torch.ones(7, 3)")))
    assert name == "eager_runs" and "RuntimeError" in result["measurement"]["error"]


def test_too_fast_for_the_window():
    name, result = failing(run(GOOD, window=(1.0, 100.0)))
    assert name == "workload_window"
    assert result["measurement"]["source"] == "estimate" and result["measurement"]["eager_ms"] < 1.0
    assert "below" in result["reason"] and result["measurement"]["cpu_ms"] > 0


def test_too_slow_for_the_window():
    name, result = failing(run(GOOD, window=(1e-6, 1e-3)))
    assert name == "workload_window" and "above" in result["reason"]


@pytest.mark.slow
def test_compile_mismatch_fails():
    code = task("if torch.compiler.is_compiling():\n    return x + 1.0\nreturn x * 1.0")
    name, result = failing(run(code))
    assert name == "compile_matches" and result["measurement"]["max_abs_diff"] == pytest.approx(1.0)


def test_kernelbench_near_duplicate_fails():
    source = (KERNELBENCH / "KernelBench" / "level1" / "2_Softsign.py").read_text()
    renamed = source.replace("Softsign", "Soft").replace("batch_size", "n")
    name, result = failing(run(renamed, kernelbench=KERNELBENCH))
    assert name == "kernelbench_similarity"
    assert result["measurement"]["max_similarity"] > 0.9
    assert result["measurement"]["most_similar"] == "level1/2_Softsign.py"


def test_unrelated_task_passes_decontamination_with_its_score_kept():
    report = run(GOOD, window=(1.0, 100.0), kernelbench=KERNELBENCH)
    first = report["filters"][0]
    assert first["name"] == "kernelbench_similarity" and first["passed"]
    assert 0 <= first["measurement"]["max_similarity"] <= 0.9


def test_static_filters_catch_stochastic_ops_by_seed_and_by_call():
    by_seed = filters.deterministic_ops("x = F.relu(x)", ["F.relu", "nn.Dropout"], {"nn.Dropout"})
    assert not by_seed.passed and by_seed.measurement["stochastic_ops"] == ["nn.Dropout"]
    by_call = filters.deterministic_ops("x = F.dropout(x, 0.5)", ["F.relu"], {"F.dropout"})
    assert not by_call.passed and "dropout" in by_call.reason
    assert filters.deterministic_ops("x = F.relu(x)", ["F.relu"], {"F.dropout"}).passed


def test_a_worker_clears_the_source_files_of_workers_that_are_gone(tmp_path, monkeypatch):
    import socket
    import subprocess
    import sys

    from cuda_agent.synth import probe

    monkeypatch.setattr(probe.tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    root = tmp_path / f"cuda-agent-synth-tasks-{os.getuid()}-{socket.gethostname()}"
    (root / gone.stdout.strip()).mkdir(parents=True)
    (root / gone.stdout.strip() / "synth_task_0.py").write_text("x = 1\n")
    alive = root / str(os.getppid())
    alive.mkdir()
    mine = probe._scratch_dir()
    assert mine == str(root / str(os.getpid()))
    assert sorted(p.name for p in root.iterdir()) == sorted([str(os.getpid()), alive.name])
