"""End-to-end judging on the CUDA backend. Needs an NVIDIA GPU; skipped cleanly elsewhere.

The candidates are CUDA workspaces under tests/fixtures/solutions/cuda: kernels/NAME.cu with an
extern "C" launcher, and NAME_binding.cpp launching it on c10::cuda::getCurrentCUDAStream().
Without a GPU, test_build.py still compiles every one of them for sm_90.
"""

from __future__ import annotations

import time

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)",
                allow_module_level=True)

from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.judge.verdict import Verdict  # noqa: E402

CALL_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def gpu_judge(judge_config) -> Judge:
    return Judge(judge_config(backend="cuda", call_timeout_s=CALL_TIMEOUT_S))


def _assert_not_correct(v: Verdict) -> None:
    assert v.correct is False and v.reward == -1
    assert v.speedup_vs_eager is None and v.speedup_vs_compile is None
    assert v.error


def test_correct_cuda_solution(gpu_judge, task, fixture_solution):
    v = gpu_judge.judge(task, fixture_solution("cuda/correct"))
    assert v.status == "ok", v.feedback
    assert v.correct is True and v.reward in (1, 2, 3)
    assert v.backend == "cuda" and v.device["backend"] == "cuda"
    assert v.build["arch"] and v.build["arch"].startswith("-gencode=arch=compute_")
    verify = [c for c in v.checks if c.phase == "verify"]
    assert len(verify) == 5 and all(c.passed for c in v.checks)
    for which in ("candidate", "eager", "compile"):
        assert v.timings[which] is not None and v.timings[which].calls > 0
    # CUDA events were recorded around every timed call and cannot exceed the host time.
    cand = v.timings["candidate"]
    assert cand.device_median_ms is not None and cand.device_median_ms <= cand.median_ms * 1.05 + 0.05
    assert v.speedup_vs_eager is not None and v.speedup_vs_compile is not None
    # Every check and every recheck of a timed call compared on the GPU, through the exchange buffer.
    assert v.settings.get("outputs_compared_on") == "gpu", v.notes
    assert any(c.phase == "timing" for c in v.checks)


def test_a_single_file_cuda_solution_is_built_by_the_judge_once_and_reused(gpu_judge, task, fixture_solution, tmp_path):
    # KernelBench's format: load_inline with cuda_sources, built by the judge (its nvcc, its
    # sandbox, its cache), not in the candidate's process, which may not run programs.
    first = gpu_judge.judge(task, fixture_solution("single_file/load_inline_cuda.py"))
    assert first.status == "ok", first.feedback
    assert first.correct is True and first.reward in (1, 2, 3)
    (built,) = first.build["load_inline"]
    assert built["name"] == "scale_bias_relu_cuda_inline" and built["objects_total"] == 2
    path = tmp_path / "model_new.py"
    path.write_text("# judged again\n" + fixture_solution("single_file/load_inline_cuda.py").files["model_new.py"])
    from cuda_agent.solution import load_solution

    again = gpu_judge.verify(task, load_solution(path))
    assert again.status == "ok", again.feedback
    assert again.build["load_inline"][0]["cache_hit"] is True and again.build["load_inline"][0]["objects_compiled"] == 0


def test_wrong_cuda_values_are_incorrect(gpu_judge, task, fixture_solution):
    v = gpu_judge.verify(task, fixture_solution("cuda/wrong_values"))
    assert v.status == "incorrect", v.feedback
    _assert_not_correct(v)
    assert "worst at output[" in v.error
    assert max(c.max_abs_error for c in v.checks) > 0.1


def test_a_group_is_checked_against_one_reference_on_the_gpu_each_in_a_buffer_of_its_own(gpu_judge, task,
                                                                                        fixture_solution):
    # One reference forward per check for the group; every candidate's output compared with it on
    # the GPU through its own exchange buffer; one candidate's illegal access ends its run alone.
    names = ["cuda/correct", "cuda/wrong_values", "cuda/correct", "cuda/illegal_address"]
    verdicts = gpu_judge.evaluate_many(task, [fixture_solution(n) for n in names], "profile")
    assert [v.status for v in verdicts] == ["ok", "incorrect", "ok", "runtime_error"], [v.error for v in verdicts]
    for v in (verdicts[0], verdicts[2]):
        assert v.correct and v.reward in (1, 2, 3) and v.timings["candidate"].median_ms > 0
        assert v.settings.get("outputs_compared_on") == "gpu", v.notes
        assert len([c for c in v.checks if c.phase == "verify"]) == 5 and all(c.passed for c in v.checks)
    assert "worst at output[" in verdicts[1].error and verdicts[1].settings.get("outputs_compared_on") == "gpu"
    assert "illegal memory access" in (verdicts[3].error + "\n" + verdicts[3].details).lower()


def test_illegal_address_is_a_runtime_error_and_the_judge_recovers(gpu_judge, task, fixture_solution):
    v = gpu_judge.verify(task, fixture_solution("cuda/illegal_address"))
    assert v.status == "runtime_error", v.feedback
    _assert_not_correct(v)
    assert "illegal memory access" in (v.error + "\n" + v.details).lower()
    after = gpu_judge.verify(task, fixture_solution("cuda/correct"))
    assert after.status == "ok" and after.correct is True, after.feedback


def test_hanging_kernel_times_out_and_the_judge_recovers(gpu_judge, task, fixture_solution):
    gpu_judge.compile(task, fixture_solution("cuda/hang"))  # build outside the measured time
    start = time.perf_counter()
    v = gpu_judge.verify(task, fixture_solution("cuda/hang"))
    elapsed = time.perf_counter() - start
    assert v.status == "timeout", v.feedback
    _assert_not_correct(v)
    assert f"within {CALL_TIMEOUT_S:.0f} s" in v.error
    assert CALL_TIMEOUT_S <= elapsed < CALL_TIMEOUT_S + 60
    after = gpu_judge.verify(task, fixture_solution("cuda/correct"))
    assert after.status == "ok" and after.correct is True, after.feedback
