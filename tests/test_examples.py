"""The example solutions: every CPU solution is correct here, every CUDA one correct and faster than
eager on a GPU (the demo's promise)."""

from __future__ import annotations

import ast
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
        assert (EXAMPLES / name / "model_cpu.py").is_file()


def _program(path: Path) -> tuple[list[str], dict[str, object]]:
    """A task file's statements but its docstring and integer settings, and those settings."""
    body = ast.parse(path.read_text()).body[1:]
    sizes = {s.targets[0].id: s.value.value for s in body
             if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and type(s.value.value) is int}
    return [ast.dump(s) for s in body if not (isinstance(s, ast.Assign) and s.targets[0].id in sizes)], sizes


@pytest.mark.parametrize("name", NAMES)
def test_the_cpu_sized_task_differs_from_the_task_only_in_its_sizes(name):
    program, sizes = _program(EXAMPLES / name / "model.py")
    cpu_program, cpu_sizes = _program(EXAMPLES / name / "model_cpu.py")
    assert cpu_program == program and cpu_sizes.keys() == sizes.keys()
    assert all(cpu_sizes[k] <= sizes[k] for k in sizes) and cpu_sizes != sizes


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cpu_solution_is_correct(name, judge_cache):
    # At the sizes the CPU backend is given (the demo's): the GPU's take minutes per check here.
    judge = Judge(JudgeConfig(backend="cpu", cache_dir=judge_cache, num_checks=2))
    verdict = judge.verify(load_task(EXAMPLES / name / "model_cpu.py"), load_solution(EXAMPLES / name / "cpu"))
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
