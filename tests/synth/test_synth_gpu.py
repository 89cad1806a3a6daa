"""Synthesis on a GPU: measured eager times decide the window, and a small real-window run."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.synth.filters import FilterSettings
from cuda_agent.synth.synthesis import SynthOptions, run_synthesis
from cuda_agent.synth.probe import ProbeSettings, check_candidate, init_worker
from cuda_agent.synth.records import FILTERS, Candidate

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)", allow_module_level=True)

HEAVY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(64, 64, 128, 128)]


def get_init_inputs():
    return [64, 128]
"""


def _check(code: str, tmp_path):
    settings = ProbeSettings(device="cuda", filters=FilterSettings(), lock_dir=str(tmp_path)).to_dict()
    init_worker(settings)
    return check_candidate(Candidate(0, code, ["nn.Conv2d", "torch.relu"], "torch#2", "test").to_dict(), settings)


def test_a_gpu_sized_task_passes_on_its_measured_time(tmp_path):
    report = _check(HEAVY, tmp_path)
    assert all(f["passed"] for f in report["filters"]), report["filters"]
    window = next(f for f in report["filters"] if f["name"] == "workload_window")
    assert window["measurement"]["source"] == "measured" and 1.0 <= report["eager_ms"] <= 100.0
    assert report["compile_ms"] > 0 and report["estimate"]["ms"] > 0


def test_a_tiny_task_is_too_fast_on_the_gpu(tmp_path):
    report = _check(HEAVY.replace("64, 64, 128, 128", "1, 64, 16, 16"), tmp_path)
    last = report["filters"][-1]
    assert last["name"] == "workload_window" and not last["passed"] and "below" in last["reason"]


def test_a_small_dataset_with_the_papers_window(tmp_path):
    options = SynthOptions(n=3, out=tmp_path / "ds", device="cuda", workers=2, include_transformers=False)
    state, _, written = run_synthesis(options)
    assert len(state.accepted) == 3
    for outcome in state.accepted:
        assert [f.name for f in outcome.filters] == list(FILTERS) and 1.0 <= outcome.eager_ms <= 100.0
    assert written["parquet"].exists()
