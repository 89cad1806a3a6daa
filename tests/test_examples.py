"""The example solutions: every CPU solution is correct here, every CUDA one correct and faster than
eager on a GPU (the demo's promise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import Judge, JudgeConfig, TimingConfig
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "model.py").is_file())


def test_there_are_three_examples_of_different_kinds():
    assert {"fused_elementwise", "rmsnorm", "gemm_epilogue"} <= set(NAMES)
    for name in NAMES:
        assert (EXAMPLES / name / "cuda" / "model_new.py").is_file()
        assert (EXAMPLES / name / "cpu" / "model_new.py").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cpu_solution_is_correct(name, judge_cache):
    judge = Judge(JudgeConfig(backend="cpu", cache_dir=judge_cache, num_checks=2))
    verdict = judge.verify(load_task(EXAMPLES / name / "model.py"), load_solution(EXAMPLES / name / "cpu"))
    assert verdict.status == "ok", verdict.feedback
    assert verdict.correct and len(verdict.checks) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_solution_is_correct_and_faster_than_eager(name, judge_cache):
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    judge = Judge(JudgeConfig(backend="cuda", cache_dir=judge_cache,
                              timing=TimingConfig(max_calls=50, target_seconds=0.5)))
    verdict = judge.judge(load_task(EXAMPLES / name / "model.py"), load_solution(EXAMPLES / name / "cuda"))
    assert verdict.status == "ok", verdict.feedback
    assert verdict.speedup_vs_eager > 1.05, verdict.feedback
    assert verdict.reward >= 2
    assert verdict.isolation["candidate"]["separate_process"]
