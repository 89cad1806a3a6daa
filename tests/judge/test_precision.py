"""A task computed in less precision than its dtype is paid no speed milestone; honest work never is.

The judge runs the reference in float64 beside every check and compares the candidate's float32,
float16 and bfloat16 outputs with it, normwise, against the reference's own error at that dtype;
float64 outputs against the reference's own. Arithmetic in bfloat16 or TF32 (inputs rounded to 7
or 10 mantissa bits) passes the 1e-2 tolerance on a float32 task but not this bound, and so does
float32 on a float64 task; the same dtype in another order of summation stays near the
reference's own error.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from cuda_agent.judge.correctness import (BOUNDS_BY_NAME, allowed_error, dtype_name, float64_norms,
                                          precision_errors, precision_report)
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task


PRECISION_FLOOR = BOUNDS_BY_NAME["float32"][1]


def float32_errors(candidate, reference, norms) -> tuple[float, float] | None:
    """The float32 outputs' (candidate's, reference's) errors, None where none were measured."""
    found = [(c, r) for dtype, c, r in precision_errors(candidate, reference, norms) if dtype == "float32"]
    assert len(found) <= 1
    return found[0] if found else None


def allowed_float32_error(reference_error: float) -> float:
    return allowed_error("float32", reference_error)


def report(*errors: tuple[float, float], dtype: str = "float32") -> dict:
    return precision_report([(dtype, c, r) for c, r in errors])


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
    assert report(errors)["reduced"] is False


@pytest.mark.parametrize("bits", [10, 7], ids=["tf32", "bf16"])
def test_tf32_and_bf16_arithmetic_are_reduced(gemm, bits):
    a, b, exact = gemm
    reduced = round_mantissa(a, bits) @ round_mantissa(b, bits)
    # Well inside the judge's normwise tolerance of 1e-2:
    assert float((reduced - a @ b).norm() / (a @ b).norm()) < 1e-2
    errors = float32_errors(reduced, a @ b, float64_norms(a @ b, exact))
    assert errors[0] > allowed_float32_error(errors[1]) >= PRECISION_FLOOR
    assert report(errors)["reduced"] is True


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
    assert report(errors)["reduced"] is True


def test_places_where_the_float64_run_is_not_finite_are_left_out(gemm):
    a, b, exact = gemm
    exact = exact.clone()
    exact[0, :5] = float("inf")
    exact[1, 0] = float("nan")
    reference = a @ b
    norms = float64_norms(reference, exact)["errors"]["float32"]
    finite = torch.isfinite(exact)
    assert norms["norm"] == pytest.approx(float(exact[finite].norm()), rel=1e-12)
    assert norms["reference"] == pytest.approx(float((reference.double() - exact)[finite].norm()), rel=1e-9)


def test_several_outputs_are_judged_together_and_others_skipped(gemm):
    a, b, exact = gemm
    reference = (a @ b, torch.arange(3), (a @ b).sum(0))
    exacts = (exact, torch.arange(3), exact.sum(0))
    reduced = round_mantissa(a, 7) @ round_mantissa(b, 7)
    norms = float64_norms(reference, exacts)
    errors = float32_errors((reduced, torch.arange(3), reduced.sum(0)), reference, norms)
    assert report(errors)["reduced"] is True
    assert report(float32_errors(reference, reference, norms))["reduced"] is False


@pytest.mark.parametrize("entry", [None, [], {}, {"reference": "0", "norm": 1.0}, {"reference": 0.0},
                                   {"reference": 0.0, "norm": 0.0}, {"reference": float("inf"), "norm": 1.0}])
def test_malformed_norms_judge_nothing(entry):
    x = torch.ones(3)
    assert float32_errors(x, x, {"errors": {"float32": entry}}) is None
    assert float32_errors(x, x, {"errors": entry}) is None
    assert precision_errors(x, x, entry) == []


def test_outputs_without_floating_values_are_not_judged():
    x = torch.arange(6)
    assert precision_errors(x, x, float64_norms(x, x.double())) == []
    assert precision_report([]) == {}


def test_an_output_the_float64_run_leaves_narrow_is_held_to_the_floor(gemm):
    a, b, exact = gemm
    reference = (a @ b, (a @ b).half())
    norms = float64_norms(reference, (exact, (a @ b).half()))  # the model casts to float16 itself
    assert set(norms["errors"]) == {"float32", "float16"} and norms["errors"]["float16"]["reference"] == 0.0
    assert [dtype for dtype, _, _ in precision_errors(reference, reference, norms)] == ["float16", "float32"]
    in_8_bits = (round_mantissa(a, 3) @ round_mantissa(b, 3)).half()
    assert precision_report(precision_errors((a @ b, in_8_bits), reference, norms))["reduced"] is True


# -- float64 tasks: the reference's own output is the yardstick --------------------------------
def test_a_float64_task_computed_in_float32_or_tf32_is_reduced_and_reordered_float64_is_not(gemm):
    a, b, _ = gemm
    a, b = a.double(), b.double()
    reference = a @ b
    norms = float64_norms(reference, reference)  # no float32 outputs: nothing to widen
    assert norms == {"errors": {}}
    split_k = sum(a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 512, 64))
    in_float32 = (a.float() @ b.float()).double()
    in_tf32 = (round_mantissa(a.float(), 10) @ round_mantissa(b.float(), 10)).double()
    for candidate, reduced in ((reference, False), (split_k, False), (in_float32, True), (in_tf32, True)):
        errors = precision_errors(candidate, reference, norms)
        assert [e[0] for e in errors] == ["float64"] and errors[0][2] == 0.0
        assert precision_report(errors)["reduced"] is reduced, errors
    assert precision_report(precision_errors(in_float32, reference, norms))["against"] == \
        "the reference's own float64 output"


# -- float16 and bfloat16 tasks: the float64 run is the yardstick, as for float32 --------------
def round_to(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` with its values rounded to ``bits`` mantissa bits (3: an 8-bit float's)."""
    return round_mantissa(x.float(), bits).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_tasks_are_held_to_their_own_dtype(gemm, dtype):
    a, b, _ = gemm
    a, b = a.to(dtype), b.to(dtype)
    exact = a.double() @ b.double()
    reference = (a.float() @ b.float()).to(dtype)  # as PyTorch does: products summed in float32
    norms = float64_norms(reference, exact)
    assert set(norms["errors"]) == {dtype_name(dtype)}
    split_k = sum(a[:, k:k + 64].float() @ b[k:k + 64].float() for k in range(0, 512, 64)).to(dtype)
    in_8_bits = (round_to(a, 3).float() @ round_to(b, 3).float()).to(dtype)
    assert float((in_8_bits.double() - reference.double()).norm() / reference.double().norm()) < 0.1
    for candidate, reduced in ((reference, False), (split_k, False), (in_8_bits, True)):
        errors = precision_errors(candidate, reference, norms)
        assert len(errors) == 1 and errors[0][0] == dtype_name(dtype)
        assert precision_report(errors)["reduced"] is reduced, errors


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
@pytest.mark.timing  # its profile must not be refused: a loaded machine can doubt an honest clock
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
@pytest.mark.timing  # its profile must not be refused: a loaded machine can doubt an honest clock
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
def test_a_reference_that_cannot_run_in_float64_is_not_checked_and_says_so(cpu_judge, fixtures_dir):
    task = _task_failing_in_float64(fixtures_dir, 'TypeError("no float64 kernel for this op")')
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok" and verdict.correct, verdict.error
    assert verdict.precision == {"unchecked": "the reference cannot run in float64 (TypeError: no float64 kernel "
                                              "for this op): those outputs' precision is not checked"}
    assert any(note.startswith("precision not checked: the reference cannot run in float64") for note in verdict.notes)
    assert verdict.speedup_withheld is None  # the task offers no yardstick: nothing is held against the solution


def float64_task(fixtures_dir):
    """The fixture task on float64 inputs and parameters."""
    from cuda_agent.task import task_from_source

    source = (fixtures_dir / "tasks" / "scale_bias_relu.py").read_text()
    source = source.replace("torch.randn(features)", "torch.randn(features, dtype=torch.float64)")
    source = source.replace("torch.randn(batch_size, features)", "torch.randn(batch_size, features, dtype=torch.float64)")
    assert source.count("dtype=torch.float64") == 2
    return task_from_source(source, name="scale_bias_relu_f64", origin="tests")


def float64_solution(fixtures_dir, root, backend: str, narrow: str | None):
    """The fixture's solution made to take and return float64; ``narrow`` rewrites its arithmetic
    (the kernel's one statement) to compute in less."""
    shutil.copytree(fixtures_dir / "solutions" / backend / "correct", root)
    model = root / "model_new.py"
    model.write_text(model.read_text().replace("torch.empty(features)", "torch.empty(features, dtype=torch.float64)"))
    assert "float64" in model.read_text()
    for path in (root / "kernels").iterdir():
        text = path.read_text().replace("float", "double").replace("kFloat32", "kFloat64")
        if narrow and path.suffix in (".cpp", ".cu") and "_binding" not in path.name:
            statement = "x[i] * scale + bias[i % cols]" if backend == "cuda" else "xr[c] * scale + bias[c]"
            assert statement in text
            text = text.replace(statement, narrow)
        path.write_text(text)
    return load_solution(root)


@pytest.mark.slow
def test_a_float64_task_computed_in_float32_is_paid_no_speedup_and_float64_work_is(cpu_judge, fixtures_dir, tmp_path):
    task = float64_task(fixtures_dir)
    narrowed = float64_solution(fixtures_dir, tmp_path / "narrow", "cpu",
                                "(double)((float)xr[c] * (float)scale + (float)bias[c])")
    verdict = cpu_judge.evaluate(task, narrowed, stage="verify")
    assert verdict.status == "ok" and verdict.correct, verdict.error  # well within 1e-2
    assert verdict.precision["reduced"] is True and verdict.precision["dtype"] == "float64", verdict.precision
    assert verdict.precision["against"] == "the reference's own float64 output"
    assert any(note.startswith("reduced precision: the float64 outputs") for note in verdict.notes)
    honest = cpu_judge.evaluate(task, float64_solution(fixtures_dir, tmp_path / "honest", "cpu", None), stage="verify")
    assert honest.status == "ok" and honest.precision["reduced"] is False, honest.precision


def test_a_report_with_an_unmeasured_call_says_why():
    said = precision_report([("float32", 1e-7, 1e-7)], "the reference's float64 run ran out of memory")
    assert said["unmeasured"] == "the reference's float64 run ran out of memory" and said["reduced"] is False
    assert precision_report([], "out of memory") == {"unmeasured": "out of memory"}


def test_a_report_names_the_dtype_nearest_its_bound():
    said = precision_report([("float64", 1e-12, 0.0), ("float32", 1e-3, 1e-7)])
    assert said["dtype"] == "float32" and said["reduced"] is True and said["allowed"] == pytest.approx(2.0 ** -14)


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


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_a_float64_task_computed_in_tf32_on_the_gpu_is_paid_no_speedup(judge_config, fixtures_dir, tmp_path):
    from cuda_agent.judge.judge import Judge

    judge = Judge(judge_config(backend="cuda"))
    task = float64_task(fixtures_dir)
    float64_solution(fixtures_dir, tmp_path / "tf32", "cuda",
                     "(double)(to_tf32_precision((float)x[i]) * (float)scale + (float)bias[i % cols])")
    kernel = next((tmp_path / "tf32" / "kernels").glob("*.cu"))
    source = kernel.read_text()
    kernel.write_text(source[:source.index("__global__")] + CUDA_ROUNDING + source[source.index("__global__"):])
    reduced = judge.evaluate(task, load_solution(tmp_path / "tf32"), stage="profile")
    assert reduced.status == "ok" and reduced.correct, reduced.error
    assert reduced.precision["reduced"] is True and reduced.precision["dtype"] == "float64", reduced.precision
    assert reduced.reward == 1 and reduced.speedup_vs_eager is None and "less precision" in reduced.speedup_withheld
    honest = judge.evaluate(task, float64_solution(fixtures_dir, tmp_path / "honest", "cuda", None), stage="verify")
    assert honest.status == "ok" and honest.precision["reduced"] is False, honest.precision


@pytest.mark.slow
def test_an_honest_fp32_kernel_is_not_flagged(cpu_judge, fixtures_dir):
    task = load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok", verdict.error
    assert verdict.precision["reduced"] is False
    assert verdict.precision["candidate_error"] <= verdict.precision["allowed"]
