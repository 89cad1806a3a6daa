"""Comparison of candidate and reference outputs, in the judge's own process."""

from __future__ import annotations

import json

import pytest
import torch

from cuda_agent.judge.correctness import compare_outputs
from cuda_agent.judge.verdict import Verdict

NAN, INF = float("nan"), float("inf")


def check(candidate, reference, atol=1e-2, rtol=1e-2, norm_rtol=None):
    return compare_outputs(candidate, reference, 0, atol, rtol, norm_rtol=norm_rtol)


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# -- tensors ---------------------------------------------------------------------------------------
def test_identical_outputs_pass_with_zero_error():
    ref = torch.randn(8, 16)
    result = check(ref.clone(), ref)
    assert result.passed and result.message == "ok"
    assert result.max_abs_error == 0.0 and result.mismatched == 0 and result.elements == 128


def test_small_errors_within_tolerance_pass_and_are_measured():
    ref = t([1.0, 2.0, 4.0])
    result = check(ref + 0.005, ref)
    assert result.passed
    assert result.max_abs_error == pytest.approx(0.005, rel=1e-3)
    assert result.max_rel_error == pytest.approx(0.005, rel=1e-3)


def test_tolerance_boundary_is_inclusive():
    # Dyadic numbers: |c - r| == atol + rtol * |r| == 1.0 holds exactly in float64.
    ref = t([2.0, -2.0])
    # The norm test is loosened so that only the per-element boundary is under test.
    assert check(t([3.0, -3.0]), ref, atol=0.5, rtol=0.25, norm_rtol=1.0).passed
    just_above = torch.nextafter(t([3.0]), t([INF]))
    result = check(just_above, t([2.0]), atol=0.5, rtol=0.25, norm_rtol=1.0)
    assert not result.passed and result.mismatched == 1


def test_tolerance_boundary_in_float64():
    ref = torch.tensor([8.0], dtype=torch.float64)
    edge = torch.tensor([8.0 + 0.25 + 0.5 * 8.0], dtype=torch.float64)
    assert check(edge, ref, atol=0.25, rtol=0.5, norm_rtol=1.0).passed
    assert not check(torch.nextafter(edge, edge + 1), ref, atol=0.25, rtol=0.5, norm_rtol=1.0).passed


def test_failure_names_count_worst_location_and_values():
    ref = torch.zeros(4, 5)
    cand = ref.clone()
    cand[1, 2] = 0.5
    cand[3, 4] = 3.0  # the worst
    result = check(cand, ref)
    assert not result.passed
    assert result.mismatched == 2 and result.elements == 20
    assert result.worst == "output[3, 4]"
    assert result.max_abs_error == pytest.approx(3.0)
    assert result.message == ("output: 2 of 20 values outside atol=0.01, rtol=0.01; worst at "
                              "output[3, 4]: got 3, expected 0")


def test_worst_location_inside_nested_outputs():
    ref = (torch.zeros(2), [torch.zeros(2, 3)])
    cand = (torch.zeros(2), [torch.zeros(2, 3)])
    cand[1][0][1, 2] = 1.0
    result = check(cand, ref)
    assert not result.passed and result.worst == "output[1][0][1, 2]"


def test_nan_where_reference_is_finite_fails():
    result = check(t([1.0, NAN, 3.0]), t([1.0, 2.0, 3.0]))
    assert not result.passed
    assert "NaN/Inf" in result.message and "1 NaN/Inf values" in result.message
    assert result.worst == "output[1]"


def test_inf_where_reference_is_finite_fails():
    assert not check(t([INF]), t([1e30])).passed


def test_all_nan_output_is_never_a_wildcard():
    ref = torch.randn(16)
    result = check(torch.full((16,), NAN), ref)
    assert not result.passed and result.mismatched == 16


def test_matching_nan_and_inf_pass():
    ref = t([NAN, INF, -INF, 1.0])
    assert check(t([NAN, INF, -INF, 1.0]), ref).passed


def test_finite_value_where_reference_is_nan_fails():
    result = check(t([0.0, 1.0]), t([NAN, 1.0]))
    assert not result.passed and result.worst == "output[0]"


@pytest.mark.parametrize("cand, ref", [([-INF], [INF]), ([INF], [-INF]), ([NAN], [INF]), ([INF], [NAN])])
def test_different_non_finite_values_fail(cand, ref):
    assert not check(t(cand), t(ref)).passed


def test_dtype_mismatch_fails_even_with_equal_values():
    result = check(t([1.0, 2.0], torch.float64), t([1.0, 2.0]))
    assert not result.passed
    assert result.message == "output has dtype torch.float64, expected torch.float32"


def test_shape_mismatch_fails_even_when_broadcastable():
    result = check(torch.zeros(1, 4), torch.zeros(4))
    assert not result.passed
    assert result.message == "output has shape (1, 4), expected (4,)"
    assert check(torch.zeros(4, 4).t(), torch.zeros(4, 4)).passed  # layout does not matter


def test_integer_outputs_must_match_exactly():
    ref = t([10, 20, 30], torch.int64)
    assert check(t([10, 20, 30], torch.int64), ref).passed
    result = check(t([10, 21, 30], torch.int64), ref, atol=100, rtol=100)
    assert not result.passed
    assert "exact match required" in result.message and result.worst == "output[1]"
    assert not check(t([True, False]), t([True, True])).passed
    assert check(t([2**62 + 1], torch.int64), t([2**62 + 1], torch.int64)).passed
    assert not check(t([2**62 + 1], torch.int64), t([2**62], torch.int64)).passed


def test_half_and_bfloat16_are_compared_in_float64():
    ref = t([1.0, 2.0], torch.bfloat16)
    assert check(ref.clone(), ref).passed
    assert not check(t([1.0, 2.5], torch.bfloat16), ref).passed
    assert check(t([1.0, 2.0], torch.float16), t([1.0, 2.0], torch.float16)).passed


def test_zero_dim_and_empty_tensors():
    assert check(torch.tensor(1.0), torch.tensor(1.0)).passed
    result = check(torch.tensor(2.0), torch.tensor(1.0))
    assert not result.passed and result.worst == "output"
    empty = check(torch.empty(0, 3), torch.empty(0, 3))
    assert empty.passed and empty.elements == 0


def test_complex_outputs_use_the_modulus_of_the_difference():
    ref = torch.tensor([1 + 1j], dtype=torch.complex64)
    assert check(ref.clone(), ref).passed
    assert not check(torch.tensor([1 + 2j], dtype=torch.complex64), ref).passed


# -- structure -------------------------------------------------------------------------------------
def test_tuple_and_list_are_not_interchangeable():
    a = torch.ones(2)
    result = check([a, a], (a, a))
    assert not result.passed and result.message == "output is a list, expected a tuple"
    assert not check((a, a), [a, a]).passed


def test_item_count_must_match():
    a = torch.ones(2)
    result = check((a,), (a, a))
    assert not result.passed and result.message == "output has 1 items, expected 2"


def test_a_tensor_is_required_where_the_reference_has_one():
    assert not check([1.0, 1.0], torch.ones(2)).passed
    assert not check(None, torch.ones(2)).passed


def test_dict_keys_must_match():
    ref = {"a": torch.ones(1), "b": torch.zeros(1)}
    assert check({"a": torch.ones(1), "b": torch.zeros(1)}, ref).passed
    assert not check({"a": torch.ones(1)}, ref).passed
    assert not check({"a": torch.ones(1), "b": torch.ones(1)}, ref).passed


def test_python_scalars():
    assert check(1.0, 1.0).passed
    assert check(1.001, 1.0).passed
    assert not check(2.0, 1.0).passed
    assert not check(True, 1.0).passed  # a bool is not a float
    assert check(3, 3).passed and not check(3, 4).passed
    assert not check(3.0, 3).passed  # int outputs compare exactly, type included
    assert check("x", "x").passed and not check("y", "x").passed
    assert check(None, None).passed


def test_phase_and_index_are_recorded():
    result = compare_outputs(torch.ones(1), torch.ones(1), 7, 1e-2, 1e-2, phase="timing")
    assert result.index == 7 and result.phase == "timing"
    assert result.to_dict()["phase"] == "timing"


def test_error_statistics_of_huge_float64_outputs_serialise():
    ref = torch.tensor([0.0, -1.7e308], dtype=torch.float64)
    result = check(torch.tensor([1e300, 1.7e308], dtype=torch.float64), ref)
    assert not result.passed
    verdict = Verdict(status="incorrect", checks=[result], error=result.message)
    written = json.loads(verdict.to_json())["checks"][0]
    assert written["passed"] is False
    assert written["max_rel_error"] is None  # inf has no JSON form: written as null


# -- tolerance that zeros cannot game ----------------------------------------------------------------
def test_zeros_fail_where_every_output_is_below_atol():
    # A softmax over a wide row: every value is ~3e-5, far below atol = 1e-2.
    ref = torch.softmax(torch.randn(4, 32768), dim=-1)
    assert float(ref.abs().max()) < 1e-2
    result = check(torch.zeros_like(ref), ref)
    assert not result.passed and result.mismatched == 0
    assert result.norm_rel_error == pytest.approx(1.0)
    assert "L2 norm" in result.message


def test_a_constant_fails_a_small_output_too():
    ref = torch.softmax(torch.randn(4, 8192), dim=-1)
    assert not check(torch.full_like(ref, float(ref.mean())), ref).passed


def test_honest_rounding_error_on_small_outputs_passes():
    x = torch.randn(4, 8192, dtype=torch.float64)
    ref = torch.softmax(x, dim=-1).float()
    cand = torch.softmax(x.float(), dim=-1)  # a different order of operations, in float32
    result = check(cand, ref)
    assert result.passed and result.norm_rel_error < 1e-5


def test_reduced_precision_dtypes_get_their_documented_floor():
    from cuda_agent.judge.correctness import tolerance_for

    assert tolerance_for(torch.float32, 1e-4, 1e-4) == (1e-4, 1e-4)
    assert tolerance_for(torch.float16, 1e-4, 1e-4) == (1e-2, 1e-2)
    assert tolerance_for(torch.bfloat16, 1e-2, 1e-2) == (2e-2, 2e-2)
    ref = torch.full((64,), 3.0, dtype=torch.bfloat16)
    cand = ref + 0.045  # 1.5% off: within bfloat16's 2e-2, outside float32's 1e-2
    assert check(cand, ref).passed
    assert not check(cand.float(), ref.float()).passed



@pytest.mark.parametrize("dtype, step", [(torch.float8_e4m3fn, 2.0 ** -3), (torch.float8_e5m2, 2.0 ** -2)])
def test_an_8_bit_float_output_is_held_to_one_rounding_step(dtype, step):
    from cuda_agent.judge.correctness import tolerance_for

    assert tolerance_for(dtype, 1e-2, 1e-2) == (step, step)
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 3
    ref = x.to(dtype)
    # rounded once more on the way (through bfloat16): at most a step off, as another kernel may be
    rounded_twice = x.to(torch.bfloat16).to(dtype)
    assert not torch.equal(rounded_twice.float(), ref.float()) and check(rounded_twice, ref).passed
    scaled = (x * 1.5).to(dtype)  # a wrong scale is many steps off
    result = check(scaled, ref)
    assert not result.passed and "values outside" in result.message
    assert not check(ref.float(), ref).passed  # the dtype itself is part of the contract

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.complex64])
def test_a_comparison_in_chunks_says_what_one_in_a_single_pass_says(monkeypatch, dtype):
    """Chunks bound the host memory of a comparison; where the outputs agree or which value is
    worst must not depend on where the chunks fall."""
    generator = torch.Generator().manual_seed(3)
    ref = torch.randn(37, 29, generator=generator).to(dtype)
    cand = ref + (1e-4 * torch.randn(37, 29, generator=generator)).to(dtype)
    cand[5, 3] += 0.5  # off in one chunk
    cand[30, 7] += 2.0  # the worst, in a later one
    if not dtype.is_complex:
        ref[10, 10] = cand[10, 10] = float("inf")  # a matched non-finite value
        cand[20, 1] = float("nan")  # a NaN where the reference is finite
    import cuda_agent.judge.correctness as correctness

    whole = compare_outputs(cand, ref, 0, 1e-2, 1e-2)
    for chunk in (1, 7, 64, 1000):
        monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", chunk)
        chunked = compare_outputs(cand, ref, 0, 1e-2, 1e-2)
        assert (chunked.passed, chunked.mismatched, chunked.worst, chunked.message) == \
            (whole.passed, whole.mismatched, whole.worst, whole.message)
        assert chunked.max_abs_error == whole.max_abs_error and chunked.max_rel_error == whole.max_rel_error
        assert chunked.norm_rel_error == pytest.approx(whole.norm_rel_error, rel=1e-12)
    # a NaN where the reference is finite is the worst of all; else the largest excess
    assert not whole.passed and whole.worst == ("output[30, 7]" if dtype.is_complex else "output[20, 1]")
    assert whole.mismatched == (2 if dtype.is_complex else 3)


def test_a_small_error_over_chunks_fails_the_norm_test_as_it_does_whole(monkeypatch):
    import cuda_agent.judge.correctness as correctness

    ref = torch.full((1000,), 1e-4)
    cand = torch.zeros(1000)  # every value within atol, the output as a whole wrong
    whole = compare_outputs(cand, ref, 0, 1e-2, 1e-2)
    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 33)
    chunked = compare_outputs(cand, ref, 0, 1e-2, 1e-2)
    assert not whole.passed and (chunked.passed, chunked.message) == (whole.passed, whole.message)
    assert "L2 norm" in chunked.message


# -- the quick look before a full comparison --------------------------------------------------------
def test_a_difference_seen_at_a_glance_is_one_the_full_comparison_fails_on():
    from cuda_agent.judge.correctness import differs_at_a_glance

    gen = torch.Generator().manual_seed(0)
    seen = 0
    for trial in range(300):
        dtype = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32)[trial % 5]
        shape = (int(torch.randint(1, 70, (1,), generator=gen)), int(torch.randint(1, 90, (1,), generator=gen)))
        ref = (torch.randn(shape, generator=gen) * 10 ** float(torch.randint(-3, 3, (1,), generator=gen)))
        noise = torch.randn(shape, generator=gen) * 10 ** float(torch.randint(-6, 1, (1,), generator=gen))
        cand = ref + noise
        if trial % 7 == 0:  # non-finite values here and there, on either side
            cand.view(-1)[:: 11] = NAN
            ref.view(-1)[:: 13] = INF
        ref, cand = ref.to(dtype), cand.to(dtype)
        if differs_at_a_glance(cand, ref, 1e-2, 1e-2, samples=64):
            seen += 1
            assert not check(cand, ref).passed, (trial, dtype)
    assert seen > 50  # the look decided many of them


def test_the_glance_says_nothing_of_what_it_did_not_look_at():
    from cuda_agent.judge.correctness import differs_at_a_glance

    ref = torch.zeros(100_000)
    cand = ref.clone()
    cand[12_345] = 1.0  # between the looked-at values
    assert not differs_at_a_glance(cand, ref, 1e-2, 1e-2, samples=16)
    assert not check(cand, ref).passed  # which is why a look that sees nothing is followed by the full one
    assert not differs_at_a_glance(ref.clone(), ref, 1e-2, 1e-2)
    assert differs_at_a_glance(ref + 1, ref, 1e-2, 1e-2)


@pytest.mark.parametrize("n", [1, 2, 4095, 4096, 4097, 536_870_977, 2_000_000_003])
def test_the_glance_reads_evenly_spaced_indices_inside_any_tensor(n):
    from cuda_agent.judge.correctness import glance_indices

    index = glance_indices(n, 4096)
    assert len(index) == min(n, 4096) and int(index[0]) == 0 and int(index[-1]) == n - 1
    assert bool((index[1:] > index[:-1]).all())  # each read once, in order, none past the end
