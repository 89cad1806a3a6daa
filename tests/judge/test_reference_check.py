"""The judge's check of a task's reference alone: determinism, baselines, failures."""

from __future__ import annotations

import pytest

from cuda_agent.judge.reference import NONDETERMINISTIC, TOO_FAST, ReferenceReport
from cuda_agent.task import task_from_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
INPUTS = "\ndef get_inputs():\n    return [torch.rand(64, 64)]\n\ndef get_init_inputs():\n    return []\n"


def _task(name: str, forward: str):
    source = HEADER + f"class Model(nn.Module):\n    def forward(self, x):\n        {forward}\n" + INPUTS
    return task_from_source(source, name, f"{name}.py")


@pytest.mark.slow
def test_a_deterministic_reference_passes_and_brings_its_baselines(cpu_judge):
    report = cpu_judge.check_reference(_task("ref_tanh", "return torch.tanh(x) * 3"))
    assert report.ok and report.error is None
    assert report.deterministic is True and report.self_max_abs_diff == 0.0
    assert report.eager.median_ms > 0 and report.compile.median_ms > 0
    assert report.device["backend"] == "cpu"
    assert report.flags(min_baseline_ms=0.0) == []
    assert report.flags(min_baseline_ms=1e6) == [TOO_FAST]
    again = ReferenceReport.from_dict(report.to_dict())
    assert again.eager.median_ms == report.eager.median_ms and again.deterministic is True


@pytest.mark.slow
def test_random_numbers_drawn_in_forward_are_found(cpu_judge):
    # Dropout in training mode draws from the global generator: the same inputs give other outputs.
    report = cpu_judge.check_reference(_task("ref_dropout", "return F.dropout(x, p=0.5, training=True)"))
    assert report.ok and report.deterministic is False
    assert report.self_max_abs_diff > 0.5
    assert NONDETERMINISTIC in report.flags(min_baseline_ms=0.0)


@pytest.mark.slow
def test_a_reference_that_fails_is_reported_not_raised(cpu_judge):
    report = cpu_judge.check_reference(_task("ref_broken", "raise RuntimeError('no such op')"))
    assert not report.ok
    assert "reference" in report.error and "no such op" in report.error
    assert report.eager is None and report.deterministic is None


@pytest.mark.slow
def test_a_reference_out_of_memory_says_what_to_do(cpu_judge):
    report = cpu_judge.check_reference(_task("ref_too_big", "raise MemoryError('cannot allocate 80 GB')"))
    assert not report.ok
    assert "do not fit in the device's memory" in report.error and "--jobs 1" in report.error
    assert "cannot allocate 80 GB" in report.error


@pytest.mark.slow
def test_the_check_reports_its_workers_peak_host_memory(cpu_judge):
    small = cpu_judge.check_reference(_task("ref_small", "return torch.tanh(x)"))
    big_source = (HEADER + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.register_buffer('big', torch.ones(64_000_000))  # 256 MB, every page touched\n"
                  "    def forward(self, x):\n        return torch.tanh(x) + self.big[0]\n" + INPUTS)
    big = cpu_judge.check_reference(task_from_source(big_source, "ref_big", "ref_big.py"))
    assert small.ok and big.ok
    assert small.worker_peak_bytes > 50e6  # a process that has loaded torch
    assert big.worker_peak_bytes - small.worker_peak_bytes > 200e6
    assert big.judge_peak_bytes > 0
    again = ReferenceReport.from_dict(big.to_dict())
    assert again.worker_peak_bytes == big.worker_peak_bytes
