"""Honest solutions that a strict but fair judge must accept: no false positives.

Each case is a directory holding a KernelBench task (``model.py``) and a workspace solution
(``solution/``: ``model_new.py`` plus ``kernels/``). The name says the backend: ``cpu_*`` cases are
C++ kernels judged end to end here, ``cuda_*`` cases are CUDA kernels judged on a GPU and skipped
cleanly elsewhere. Every solution keeps to the rules in ``cuda_agent.judge.rules`` while doing
things a careless rule would trip over; README.md beside this file lists what each one exercises.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from cuda_agent.judge import Judge, TimingConfig, cpu_samples
from cuda_agent.judge.evidence import LIBRARY_SHARE
from cuda_agent.solution import CUDA_SOURCE_SUFFIXES, load_solution
from cuda_agent.task import load_task

HONEST = Path(__file__).resolve().parent
CASES = sorted(p.name for p in HONEST.iterdir() if (p / "model.py").is_file())
CPU_CASES = [name for name in CASES if name.startswith("cpu_")]
CUDA_CASES = [name for name in CASES if name.startswith("cuda_")]

# Cases that must also beat eager PyTorch by a clear factor (on a GPU), and by how much.
MIN_SPEEDUP_VS_EAGER = {"cuda_fused_chain": 3.0}


def _load(name: str):
    return load_task(HONEST / name / "model.py"), load_solution(HONEST / name / "solution")


def _assert_accepted(verdict) -> None:
    assert verdict.status == "ok", verdict.feedback
    assert verdict.correct, verdict.feedback
    assert verdict.violations == [], [v.render() for v in verdict.violations]
    assert verdict.reward >= 1, verdict.feedback


# -- the set itself: cheap checks that run everywhere -------------------------------------------
def test_the_set_covers_both_backends():
    assert len(CASES) >= 12
    assert len(CPU_CASES) >= 6 and len(CUDA_CASES) >= 6
    assert set(CASES) == set(CPU_CASES) | set(CUDA_CASES), "every case is named cpu_* or cuda_*"


def test_the_readme_lists_every_case():
    readme = (HONEST / "README.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", readme, flags=re.MULTILINE))
    assert listed == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_case_layout_matches_its_backend(name):
    task, solution = _load(name)
    assert solution.layout == "workspace"
    assert solution.binding_files(), name
    has_cuda = bool(solution.kernel_files(CUDA_SOURCE_SUFFIXES))
    assert has_cuda == name.startswith("cuda_"), name


@pytest.mark.parametrize("name", CASES)
def test_model_new_has_no_try_and_no_torch_math_calls(name):
    # A guard that keeps the cases honest as they are edited: no try/except, no eval/exec, and
    # nothing from torch.nn.functional. The judge's own rules are far more thorough than this.
    tree = ast.parse((HONEST / name / "solution" / "model_new.py").read_text())
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Try), f"{name}: try/except in model_new.py"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("eval", "exec", "compile", "__import__"), name
        if isinstance(node, ast.Attribute):
            assert node.attr != "functional", f"{name}: torch.nn.functional in model_new.py"


@pytest.mark.parametrize("name", CASES)
def test_kernels_have_no_try_catch_or_token_pasting(name):
    for path in sorted((HONEST / name / "solution" / "kernels").iterdir()):
        text = path.read_text()
        assert not re.search(r"\btry\s*\{|\bcatch\s*\(", text), f"{path.name}: try/catch"
        assert "##" not in text, f"{path.name}: token pasting"
        assert "std::thread" not in text and "getenv" not in text, path.name


# -- the CPU cases, judged end to end ------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_CASES)
def test_cpu_case_builds(name, cpu_judge):
    # Built beside the other tests: the end-to-end judge below runs alone (marked timing), where a
    # build's compile would keep every core waiting; it then finds the build cached.
    task, solution = _load(name)
    verdict = cpu_judge.evaluate(task, solution, stage="compile")
    assert verdict.status == "ok" and verdict.violations == [], verdict.feedback
    assert verdict.build["objects_total"] > 0


# Marked timing: the verdict is "ok" only where the timing checks believe the candidate's time,
# and under a parallel run's load an honest candidate's untimed steps can stray beyond what the
# reference's beside them allow (a loaded two-core machine refused one case in ten this way).
@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.parametrize("name", CPU_CASES)
def test_cpu_case_is_accepted(name, cpu_judge):
    task, solution = _load(name)
    verdict = cpu_judge.judge(task, solution)
    _assert_accepted(verdict)
    assert verdict.stage == "profile"
    assert verdict.timing_integrity["inputs_staged"] is True  # the reference made every timed input
    # The kernel's samples of its timed calls, read by the judge, find no other library computing.
    samples = verdict.timing_integrity["cpu_samples"]
    if cpu_samples.unavailable() is None:
        assert samples["library_share"] <= LIBRARY_SHARE, samples
    else:
        assert samples.startswith("not taken: this host refuses sampling"), samples


# -- the CUDA cases, on a GPU ------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda_judge(judge_config) -> Judge:
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)")
    return Judge(judge_config(backend="cuda", call_timeout_s=30.0,
                              timing=TimingConfig(max_calls=50, target_seconds=0.5)))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", CUDA_CASES)
def test_cuda_case_is_accepted(name, cuda_judge):
    task, solution = _load(name)
    verdict = cuda_judge.judge(task, solution)
    _assert_accepted(verdict)
    assert verdict.timing_integrity["inputs_staged"] is True  # the reference made every timed input
    minimum = MIN_SPEEDUP_VS_EAGER.get(name)
    if minimum is not None:
        assert verdict.speedup_vs_eager is not None and verdict.speedup_vs_eager > minimum, verdict.feedback
