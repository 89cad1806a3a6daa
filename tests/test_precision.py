"""An fp32 task computed in less precision is paid no speed milestone; honest fp32 never is.

The judge runs the reference in float64 beside every check and compares the candidate's float32
outputs with it, normwise, against the reference's own float32 error. Arithmetic in bfloat16 or
TF32 (inputs rounded to 7 or 10 mantissa bits) passes the 1e-2 tolerance but not this bound;
float32 in another order of summation stays near the reference's own error.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from cuda_agent.judge.correctness import (PRECISION_FLOOR, allowed_float32_error, float32_errors,
                                          float64_norms, precision_report)
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """float32 values rounded to ``bits`` mantissa bits (7: bfloat16, 10: TF32)."""
    drop = 23 - bits
    as_int = x.contiguous().view(torch.int32)
    rounded = (as_int + (1 << (drop - 1))) & ~((1 << drop) - 1)
    return rounded.view(torch.float32)


@pytest.fixture
def gemm():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(128, 512, generator=generator)
    b = torch.randn(512, 96, generator=generator)
    return a, b, a.double() @ b.double()


def test_float32_in_another_summation_order_is_not_reduced(gemm):
    a, b, exact = gemm
    reference = a @ b
    split_k = sum(a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 512, 64))  # another order
    errors = float32_errors(split_k, reference, float64_norms(reference, exact))
    assert errors is not None
    assert errors[0] < allowed_float32_error(errors[1])
    assert precision_report([errors])["reduced"] is False


@pytest.mark.parametrize("bits", [10, 7], ids=["tf32", "bf16"])
def test_tf32_and_bf16_arithmetic_are_reduced(gemm, bits):
    a, b, exact = gemm
    reduced = round_mantissa(a, bits) @ round_mantissa(b, bits)
    # Well inside the judge's normwise tolerance of 1e-2:
    assert float((reduced - a @ b).norm() / (a @ b).norm()) < 1e-2
    errors = float32_errors(reduced, a @ b, float64_norms(a @ b, exact))
    assert errors[0] > allowed_float32_error(errors[1]) >= PRECISION_FLOOR
    assert precision_report([errors])["reduced"] is True


def direct_errors(candidate: torch.Tensor, reference: torch.Tensor, exact: torch.Tensor) -> tuple[float, float]:
    """The errors computed the plain way, everything widened to float64 in one place."""
    finite = torch.isfinite(exact)
    e = exact[finite]
    norm = float(e.norm())
    return (float((candidate.double()[finite] - e).norm()) / norm,
            float((reference.double()[finite] - e).norm()) / norm)


@pytest.mark.parametrize("bits", [23, 10, 7], ids=["fp32", "tf32", "bf16"])
def test_the_measured_error_is_within_the_references_own_of_the_float64_one(gemm, bits):
    a, b, exact = gemm
    reference = a @ b
    candidate = round_mantissa(a, bits) @ round_mantissa(b, bits) if bits < 23 else \
        sum(a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 512, 64))
    got = float32_errors(candidate, reference, float64_norms(reference, exact))
    true_error, reference_error = direct_errors(candidate, reference, exact)
    assert got[1] == pytest.approx(reference_error, rel=1e-9)
    assert abs(got[0] - true_error) <= reference_error * (1 + 1e-6)  # the triangle inequality
    if bits < 23:  # far above the reference's own error, so the estimate is close in relative terms
        assert got[0] == pytest.approx(true_error, rel=1e-3)


@pytest.mark.parametrize("scale", [1e-21, 1.0, 1e22])
def test_errors_of_very_small_and_very_large_outputs_are_measured(scale):
    """Squares of float32 values are taken in float64, where they neither underflow nor overflow."""
    generator = torch.Generator().manual_seed(1)
    exact = torch.randn(1000, generator=generator, dtype=torch.float64) * scale
    reference = exact.float()
    tf32 = (exact * (1 + 1e-3 * torch.randn(1000, generator=generator, dtype=torch.float64))).float()
    errors = float32_errors(tf32, reference, float64_norms(reference, exact))
    assert errors is not None and errors[0] == pytest.approx(direct_errors(tf32, reference, exact)[0], rel=1e-3)
    assert precision_report([errors])["reduced"] is True


def test_places_where_the_float64_run_is_not_finite_are_left_out(gemm):
    a, b, exact = gemm
    exact = exact.clone()
    exact[0, :5] = float("inf")
    exact[1, 0] = float("nan")
    reference = a @ b
    norms = float64_norms(reference, exact)
    finite = torch.isfinite(exact)
    assert norms["norm_sq"] == pytest.approx(float((exact[finite] ** 2).sum()), rel=1e-12)
    assert norms["reference_sq"] == pytest.approx(float(((reference.double() - exact)[finite] ** 2).sum()), rel=1e-9)


def test_several_outputs_are_judged_together_and_others_skipped(gemm):
    a, b, exact = gemm
    reference = (a @ b, torch.arange(3), (a @ b).sum(0))
    exacts = (exact, torch.arange(3), exact.sum(0))
    reduced = round_mantissa(a, 7) @ round_mantissa(b, 7)
    norms = float64_norms(reference, exacts)
    errors = float32_errors((reduced, torch.arange(3), reduced.sum(0)), reference, norms)
    assert precision_report([errors])["reduced"] is True
    assert precision_report([float32_errors(reference, reference, norms)])["reduced"] is False


@pytest.mark.parametrize("norms", [None, [], {}, {"reference_sq": "0", "norm_sq": 1.0}, {"reference_sq": 0.0},
                                   {"reference_sq": 0.0, "norm_sq": 0.0}, {"reference_sq": float("inf"), "norm_sq": 1.0}])
def test_malformed_norms_judge_nothing(norms):
    x = torch.ones(3)
    assert float32_errors(x, x, norms) is None


def test_outputs_without_float32_are_not_judged():
    x = torch.arange(6)
    assert float32_errors(x, x, float64_norms(x, x.double())) is None
    assert precision_report([]) == {}


ROUNDING = '''
#include <cstring>

// The multiply in TF32: x rounded to 10 mantissa bits first, as a TF32 tensor-core path would.
static inline float to_tf32_precision(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits = (bits + 0x1000u) & 0xFFFFE000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}
'''


@pytest.fixture
def tf32_solution(tmp_path, fixtures_dir):
    root = tmp_path / "tf32-inside"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    kernel = root / "kernels" / "scale_bias_relu.cpp"
    source = kernel.read_text().replace("#include <cstdint>\n", "#include <cstdint>\n" + ROUNDING)
    source = source.replace("xr[c] * scale + bias[c]", "to_tf32_precision(xr[c]) * scale + bias[c]")
    assert "to_tf32_precision(xr[c])" in source
    kernel.write_text(source)
    return load_solution(root)


@pytest.mark.slow
def test_a_kernel_that_computes_in_tf32_is_paid_no_speedup(cpu_judge, fixtures_dir, tf32_solution):
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verdict = cpu_judge.evaluate(task, tf32_solution, stage="profile")
    assert verdict.status == "ok" and verdict.correct, verdict.error  # within 1e-2
    assert verdict.precision["reduced"] is True, verdict.precision
    assert verdict.timings["candidate"] is not None  # timed like any other, and then not paid for
    assert verdict.reward == 1
    assert any("less precision" in note for note in verdict.notes)
    assert "less precision" in verdict.feedback
    # Not paid anywhere: no speedup for the bench's metrics or the agent's best solution to read.
    assert verdict.speedup_vs_eager is None and verdict.speedup_vs_compile is None
    assert "less precision" in verdict.speedup_withheld and verdict.reward_continuous == -1.0
    assert verdict.timing_integrity["unpaid_speedups"]["eager"] > 0  # what was measured, kept aside


@pytest.mark.slow
def test_a_kernel_exact_while_verified_and_tf32_once_timed_is_paid_no_speedup(cpu_judge, fixtures_dir, tmp_path):
    """The verify checks see float32; every call after them (the timed ones) rounds to TF32. The
    rechecks of timed calls measure precision too, so the switch is seen."""
    root = tmp_path / "tf32-once-timed"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    kernel = root / "kernels" / "scale_bias_relu.cpp"
    source = kernel.read_text().replace("#include <cstdint>\n", "#include <cstdint>\n" + ROUNDING)
    source = source.replace("int64_t rows, int64_t cols, float scale) {\n",
                            "int64_t rows, int64_t cols, float scale) {\n"
                            "    static int64_t launches = 0;\n"
                            f"    const bool timed = ++launches > {cpu_judge.config.num_checks};\n")
    source = source.replace("xr[c] * scale + bias[c]", "(timed ? to_tf32_precision(xr[c]) : xr[c]) * scale + bias[c]")
    assert "static int64_t launches" in source and "timed ?" in source
    kernel.write_text(source)
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verified = cpu_judge.evaluate(task, load_solution(root), stage="verify")
    assert verified.status == "ok" and verified.precision["reduced"] is False, verified.precision  # exact there
    verdict = cpu_judge.evaluate(task, load_solution(root), stage="profile")
    assert verdict.status == "ok" and verdict.correct, verdict.error
    assert verdict.precision["reduced"] is True, verdict.precision
    assert verdict.reward == 1 and "less precision" in verdict.feedback


def _task_failing_in_float64(fixtures_dir, error: str):
    """The fixture task, whose forward raises ``error`` when it runs in float64 (the judge's
    yardstick run) and computes as before in float32."""
    from cuda_agent.task import task_from_source

    source = (fixtures_dir / "tasks" / "scale_bias_relu.py").read_text()
    source = source.replace("    def forward(self, x):\n",
                            "    def forward(self, x):\n"
                            f"        if x.dtype == torch.float64:\n            raise {error}\n")
    assert f"raise {error}" in source
    return task_from_source(source, name="scale_bias_relu", origin="tests")


@pytest.mark.slow
def test_precision_the_reference_could_not_measure_for_lack_of_memory_is_not_paid(cpu_judge, fixtures_dir):
    """A candidate that holds memory must not switch the check off: a float64 run that runs out
    of memory (twice) leaves the precision unmeasured, and unmeasured precision earns no speedup."""
    task = _task_failing_in_float64(fixtures_dir, 'MemoryError("no room for the float64 copy")')
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="profile")
    assert verdict.status == "ok" and verdict.correct, verdict.error
    assert verdict.precision["unmeasured"] == "the reference's float64 run ran out of memory", verdict.precision
    assert verdict.timings["candidate"] is not None and verdict.reward == 1
    assert "its precision could not be measured" in verdict.feedback
    assert verdict.speedup_vs_eager is None and verdict.speedup_vs_compile is None
    assert "could not be measured" in verdict.speedup_withheld


@pytest.mark.slow
def test_a_reference_that_cannot_run_in_float64_is_not_checked(cpu_judge, fixtures_dir):
    task = _task_failing_in_float64(fixtures_dir, 'TypeError("no float64 kernel for this op")')
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok" and verdict.correct, verdict.error
    assert verdict.precision == {}
    assert not any("precision" in note for note in verdict.notes)


def test_a_report_with_an_unmeasured_call_says_why():
    report = precision_report([(1e-7, 1e-7)], "the reference's float64 run ran out of memory")
    assert report["unmeasured"] == "the reference's float64 run ran out of memory" and report["reduced"] is False
    assert precision_report([], "out of memory") == {"unmeasured": "out of memory"}


CUDA_ROUNDING = '''
// The multiply in TF32: x rounded to 10 mantissa bits first, as a TF32 tensor-core path would.
__device__ __forceinline__ float to_tf32_precision(float v) {
    unsigned int bits = __float_as_uint(v);
    bits = (bits + 0x1000u) & 0xFFFFE000u;
    return __uint_as_float(bits);
}
'''


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_a_cuda_kernel_that_computes_in_tf32_is_paid_no_speedup_and_the_honest_one_is(judge_config, fixtures_dir,
                                                                                       tmp_path):
    from cuda_agent.judge.judge import Judge

    root = tmp_path / "tf32-cuda"
    shutil.copytree(fixtures_dir / "solutions" / "cuda" / "correct", root)
    kernel = root / "kernels" / "scale_bias_relu.cu"
    source = kernel.read_text()
    first_kernel = source.index("__global__")
    source = source[:first_kernel] + CUDA_ROUNDING + source[first_kernel:]
    source = source.replace("x[i] * scale + bias[i % cols]", "to_tf32_precision(x[i]) * scale + bias[i % cols]")
    assert "to_tf32_precision(x[i])" in source
    kernel.write_text(source)
    judge = Judge(judge_config(backend="cuda"))
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    reduced = judge.evaluate(task, load_solution(root), stage="verify")
    assert reduced.status == "ok", reduced.error
    assert reduced.precision["reduced"] is True, reduced.precision
    honest = judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cuda" / "correct"), stage="verify")
    assert honest.status == "ok", honest.error
    assert honest.precision["reduced"] is False, honest.precision


@pytest.mark.slow
def test_an_honest_fp32_kernel_is_not_flagged(cpu_judge, fixtures_dir):
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok", verdict.error
    assert verdict.precision["reduced"] is False
    assert verdict.precision["candidate_error"] <= verdict.precision["allowed"]
