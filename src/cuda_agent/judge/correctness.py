"""Compare a candidate's output with the reference's, in the judge's own process.

Structure, type, shape and dtype must match exactly. A floating tensor passes when

* every element satisfies ``|c - r| <= atol + rtol * |r|`` where the reference is finite, and
* the error as a whole is small relative to the output: ``||c - r||_2 <= rtol * ||r||_2``.

The second test is what makes a tolerance mean something for small outputs: a softmax over a
wide row has values far below any absolute tolerance, so zeros would pass the first test alone,
never the second. Both are computed in float64, a chunk of the output at a time so that host
memory stays bounded whatever the output's size. Where the reference is NaN or infinite the
candidate must have the same non-finite value; a non-finite candidate value where the reference
is finite always fails: NaN is never a wildcard. Integer and boolean outputs must match exactly.

Tolerances depend on the output's dtype (``tolerance_for``): the configured values (the paper's
1e-2) for float32 and float64, and no tighter than 1e-2 for float16 and 2e-2 for bfloat16, whose
8-bit mantissa cannot hold 1e-2 through a different order of summation; 8-bit floats no tighter
than one rounding step (2^-3 for e4m3, 2^-2 for e5m2).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

# Floating outputs are compared this many elements at a time (float64 temporaries of 32 MB each);
# on a GPU in larger chunks, since each chunk costs a few synchronisations (an 8.6 GB output
# took 0.76 s on an H100 in chunks of 4M elements, 0.41 s in chunks of 64M).
CHUNK_ELEMENTS = 1 << 22
DEVICE_CHUNK_ELEMENTS = 1 << 24
EXACT_DTYPES = (torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
# The loosest tolerance each reduced-precision dtype gets, whatever is configured. An 8-bit float
# holds 3 (e4m3) or 2 (e5m2) mantissa bits: one rounding apart is 2^-3 or 2^-2 of the value, so a
# kernel that rounds once, in another order than the reference, is that far off.
_FLOAT8_FLOORS = {"float8_e4m3fn": 2.0 ** -3, "float8_e4m3fnuz": 2.0 ** -3,
                  "float8_e5m2": 2.0 ** -2, "float8_e5m2fnuz": 2.0 ** -2}
DTYPE_FLOORS = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.complex32: 1e-2,
                **{getattr(torch, name): floor for name, floor in _FLOAT8_FLOORS.items() if hasattr(torch, name)}}


def tolerance_for(dtype: torch.dtype, atol: float, rtol: float) -> tuple[float, float]:
    """(atol, rtol) for outputs of ``dtype``, given the configured float32 values."""
    floor = DTYPE_FLOORS.get(dtype, 0.0)
    return max(atol, floor), max(rtol, floor)


@dataclass
class CheckResult:
    index: int
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    norm_rel_error: float | None = None   # ||c - r|| / ||r|| over all floating outputs
    mismatched: int = 0           # elements outside tolerance
    elements: int = 0
    worst: str | None = None      # where the largest error is, e.g. "output[0][3, 17]"
    message: str = ""
    phase: str = "verify"         # verify | timing (an output of a timed call) | inputs | aliases

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Tally:
    max_abs: float = 0.0
    max_rel: float = 0.0
    norm_rel: float = 0.0
    mismatched: int = 0
    elements: int = 0
    worst: str | None = None
    worst_excess: float = -math.inf
    problem: str = ""
    values: bool = True   # False: structure, types, dtypes and shapes only
    # Per floating dtype of the outputs (by name), L2 norms over the places where both are finite:
    # of c - r, and of r (float64's yardstick is its own reference); a dtype judged has an entry.
    distance: dict[str, float] = field(default_factory=dict)
    magnitude: dict[str, float] = field(default_factory=dict)

    def fail(self, message: str) -> None:
        if not self.problem:
            self.problem = message


def _wide_chunks(a: torch.Tensor, b: torch.Tensor, wide: torch.dtype = torch.float64):
    """(start, a's chunk, b's chunk) over two tensors of one shape, flattened, each chunk of
    ``CHUNK_ELEMENTS`` widened to ``wide``: the temporaries stay bounded whatever the size.

    Every chunk is a copy, even where the dtype is already ``wide``: a candidate's output in the
    exchange buffer (``device_exchange``) stays writable by the candidate's process, so each value
    is read once and every decision about it is made on that one reading."""
    a_flat, b_flat = a.detach().reshape(-1), b.detach().reshape(-1)
    chunk = CHUNK_ELEMENTS if a_flat.device.type == "cpu" else DEVICE_CHUNK_ELEMENTS
    for start in range(0, a_flat.numel(), chunk):
        stop = start + chunk
        yield start, a_flat[start:stop].to(wide, copy=True), b_flat[start:stop].to(wide, copy=True)


def _index_str(flat_index: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return ""
    coords = []
    for size in reversed(shape):
        coords.append(flat_index % size)
        flat_index //= size
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"


def _compare_tensor(cand: torch.Tensor, ref: torch.Tensor, where: str, atol: float, rtol: float,
                    tally: _Tally, norm_rtol: float | None) -> None:
    if type(cand) is not torch.Tensor:
        tally.fail(f"{where} is a {type(cand).__name__}, expected a torch.Tensor")
        return
    if cand.dtype != ref.dtype:
        tally.fail(f"{where} has dtype {cand.dtype}, expected {ref.dtype}")
        return
    if tuple(cand.shape) != tuple(ref.shape):
        tally.fail(f"{where} has shape {tuple(cand.shape)}, expected {tuple(ref.shape)}")
        return
    n = ref.numel()
    tally.elements += n
    if not tally.values:
        return
    contracted = dtype_name(ref.dtype) if ref.dtype in PRECISION_BOUNDS else None
    if contracted:
        tally.distance.setdefault(contracted, 0.0)
        tally.magnitude.setdefault(contracted, 0.0)
    if n == 0:
        return
    if ref.dtype in EXACT_DTYPES:
        bad = cand != ref
        count = int(bad.sum())
        if count:
            first = int(bad.reshape(-1).nonzero()[0])
            tally.mismatched += count
            tally.worst = f"{where}{_index_str(first, tuple(ref.shape))}"
            tally.fail(f"{where}: {count} of {n} values differ (exact match required for {ref.dtype})")
        return

    atol, rtol = tolerance_for(ref.dtype, atol, rtol)
    count = n_nonfinite = 0
    ref_norm = err_norm = 0.0
    worst: tuple[float, int, Any, Any] | None = None  # (excess over the tolerance, flat index, got, want)
    for start, c, r in _wide_chunks(cand, ref, torch.complex128 if cand.is_complex() else torch.float64):
        ref_finite = torch.isfinite(r)
        cand_finite = torch.isfinite(c)
        # Non-finite reference values must be reproduced exactly (same NaN / same signed infinity).
        nonfinite_ok = (~ref_finite) & ((torch.isnan(r) & torch.isnan(c)) | (r == c))
        cand_bad_nonfinite = ref_finite & ~cand_finite
        both = ref_finite & cand_finite
        diff = torch.where(both, (c - r).abs(), torch.zeros((), dtype=torch.float64))
        allowed = atol + rtol * torch.where(ref_finite, r.abs(), torch.zeros((), dtype=torch.float64))
        bad = (ref_finite & (cand_bad_nonfinite | (diff > allowed))) | (~ref_finite & ~nonfinite_ok)
        if both.any():
            finite_diff = diff[both]
            tally.max_abs = max(tally.max_abs, float(finite_diff.max()))
            rel = finite_diff / r[both].abs().clamp_min(1e-12)
            tally.max_rel = max(tally.max_rel, float(rel.max()))
            chunk_ref, chunk_err = float(torch.linalg.vector_norm(r[both])), float(torch.linalg.vector_norm(finite_diff))
            ref_norm, err_norm = math.hypot(ref_norm, chunk_ref), math.hypot(err_norm, chunk_err)
            if contracted:
                tally.distance[contracted] = math.hypot(tally.distance[contracted], chunk_err)
                tally.magnitude[contracted] = math.hypot(tally.magnitude[contracted], chunk_ref)
        chunk_bad = int(bad.sum())
        if chunk_bad:
            count += chunk_bad
            n_nonfinite += int(cand_bad_nonfinite.sum())
            excess = torch.where(bad, diff - allowed + cand_bad_nonfinite.double() * 1e300,
                                 torch.full_like(diff, -1e308))
            local = int(excess.argmax())
            if worst is None or float(excess[local]) > worst[0]:
                worst = (float(excess[local]), start + local, c[local].item(), r[local].item())
    if ref_norm > 0:
        norm_rel = err_norm / ref_norm
        tally.norm_rel = max(tally.norm_rel, norm_rel)
        limit = rtol if norm_rtol is None else norm_rtol
        if norm_rel > limit and not count:
            tally.fail(f"{where}: the error is {norm_rel:.3g} of the output's magnitude (L2 norm), above "
                       f"{limit:g}; every value is within atol={atol:g} only because the outputs "
                       "are small, so this is not a match")
    if count:
        tally.mismatched += count
        excess_value, worst_flat, got, want = worst
        if excess_value > tally.worst_excess:
            tally.worst_excess = excess_value
            idx = _index_str(worst_flat, tuple(ref.shape))
            tally.worst = f"{where}{idx}"
            tally.fail(f"{where}: {count} of {n} values outside atol={atol:g}, rtol={rtol:g}; worst at "
                       f"{where}{idx}: got {got:.6g}, expected {want:.6g}")
        if n_nonfinite:
            tally.problem = (f"{where}: {n_nonfinite} NaN/Inf values where the reference is finite; "
                             + tally.problem)


def _compare(cand: Any, ref: Any, where: str, atol: float, rtol: float, tally: _Tally,
             norm_rtol: float | None = None) -> None:
    if isinstance(ref, torch.Tensor):
        _compare_tensor(cand, ref, where, atol, rtol, tally, norm_rtol)
    elif isinstance(ref, (list, tuple)):
        if type(cand) is not type(ref):
            tally.fail(f"{where} is a {type(cand).__name__}, expected a {type(ref).__name__}")
        elif len(cand) != len(ref):
            tally.fail(f"{where} has {len(cand)} items, expected {len(ref)}")
        else:
            for i, (c, r) in enumerate(zip(cand, ref)):
                _compare(c, r, f"{where}[{i}]", atol, rtol, tally, norm_rtol)
    elif isinstance(ref, dict):
        if not isinstance(cand, dict) or set(cand) != set(ref):
            tally.fail(f"{where} must be a dict with keys {sorted(ref)}")
        else:
            for key in ref:
                _compare(cand[key], ref[key], f"{where}[{key!r}]", atol, rtol, tally, norm_rtol)
    elif isinstance(ref, float) and not isinstance(ref, bool):
        if not isinstance(cand, (int, float)) or isinstance(cand, bool):
            tally.fail(f"{where} is {type(cand).__name__}, expected a float")
        elif not math.isclose(cand, ref, rel_tol=rtol, abs_tol=atol) and not (math.isnan(ref) and math.isnan(cand)):
            tally.fail(f"{where} is {cand!r}, expected {ref!r}")
    elif type(cand) is not type(ref) or cand != ref:
        tally.fail(f"{where} is {cand!r}, expected {ref!r}")


def _tally(candidate: Any, reference: Any, atol: float, rtol: float, norm_rtol: float | None,
           values: bool) -> _Tally:
    tally = _Tally(values=values)
    _compare(candidate, reference, "output", atol, rtol, tally, norm_rtol)
    return tally


def _check_result(tally: _Tally, index: int, phase: str) -> CheckResult:
    return CheckResult(index=index, passed=not tally.problem, max_abs_error=tally.max_abs,
                       max_rel_error=tally.max_rel, norm_rel_error=tally.norm_rel, mismatched=tally.mismatched,
                       elements=tally.elements, worst=tally.worst, message=tally.problem or "ok", phase=phase)


def glance_indices(n: int, samples: int, device: Any = "cpu") -> torch.Tensor:
    """``min(n, samples)`` evenly spaced indices from 0 to n - 1, in integers: a float linspace
    rounds n - 1 up past the end for large n (a 2 GB float32 output on the GPU)."""
    count = min(n, samples)
    return torch.arange(count, dtype=torch.int64, device=device) * (n - 1) // max(count - 1, 1)


def differs_at_a_glance(candidate: torch.Tensor, reference: torch.Tensor, atol: float, rtol: float,
                        samples: int = 4096) -> bool:
    """Whether a few evenly spaced values of two tensors of one dtype and shape already differ by
    more than ``compare_outputs`` allows an element (non-finite ones left out): then it fails too,
    and need not read the rest. False says nothing either way."""
    n = reference.numel()
    if n == 0 or candidate.shape != reference.shape or candidate.dtype != reference.dtype:
        return False
    index = glance_indices(n, samples, reference.device)
    wide = torch.complex128 if reference.is_complex() else torch.float64
    c, r = (t.reshape(-1)[index].to(wide) for t in (candidate, reference))
    if reference.dtype in EXACT_DTYPES:
        return bool((c != r).any())
    atol, rtol = tolerance_for(reference.dtype, atol, rtol)
    both = torch.isfinite(c) & torch.isfinite(r)
    return bool(((c - r).abs() > atol + rtol * r.abs())[both].any())


def compare_outputs(candidate: Any, reference: Any, index: int, atol: float, rtol: float,
                    phase: str = "verify", norm_rtol: float | None = None, values: bool = True) -> CheckResult:
    """Compare one output structure; ``norm_rtol`` bounds the L2 error (default: the dtype's rtol).
    ``values=False`` compares everything but the values: the structure, types, dtypes and shapes."""
    return _check_result(_tally(candidate, reference, atol, rtol, norm_rtol, values), index, phase)


def compare_and_measure(candidate: Any, reference: Any, index: int, atol: float, rtol: float, norms: Any,
                        phase: str = "verify", norm_rtol: float | None = None,
                        values: bool = True) -> tuple[CheckResult, list[tuple[str, float, float]]]:
    """``compare_outputs``, and the precision errors (``precision_errors``) of a check that passed
    where the reference measured its float64 run (``norms`` from ``float64_norms``; none for a
    failed check, which pays nothing anyway, nor for an unmeasured run, reported from ``norms``).

    Both come from one reading of the candidate's values: an output the candidate's process can
    still write to (the exchange buffer) cannot pass the comparison with one value and be
    measured with another."""
    tally = _tally(candidate, reference, atol, rtol, norm_rtol, values)
    check = _check_result(tally, index, phase)
    if not check.passed or not values or not isinstance(norms, dict) or norms.get("unmeasured"):
        return check, []  # a reference not asked for its float64 run (precision not checked) included
    return check, _precision_errors(tally, norms)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# -- precision: a task computed in less than its dtype --------------------------------------------
# Each floating dtype is a contract (docs/security.md): an output of that dtype may be off its
# yardstick by FACTOR times the reference's own error at that dtype, or by FLOOR, whichever is
# larger. The yardstick of float32, float16 and bfloat16 outputs is the reference run in float64;
# float64 has nothing wider, so its yardstick is the reference's own float64 output (its own error
# taken as nil) and the floor alone decides: 2^-32 lies between float64 in any order of summation
# (errors near 2^-50) and anything computed in float32 or less (2^-24 and above). For float32,
# TF32 (10 mantissa bits), bfloat16 and float16 arithmetic all leave a few times 2^-11 or more,
# float32 in any order of summation errors near the reference's own. For float16 and bfloat16 the
# next format down is an 8-bit float (2 or 3 mantissa bits: a GEMM's normwise error near 0.04);
# their bounds sit between that and the reference's way of summing (in float32, rounding once)
# in another order. A kernel that sums hundreds of terms in the 16-bit dtype itself comes near
# them (bfloat16: 0.027 over 512 terms, where the bound is 0.027).
PRECISION_BOUNDS = {torch.float64: (0.0, 2.0 ** -32), torch.float32: (256.0, 2.0 ** -14),
                    torch.float16: (32.0, 2.0 ** -7), torch.bfloat16: (16.0, 2.0 ** -6)}
BOUNDS_BY_NAME = {dtype_name(dtype): bound for dtype, bound in PRECISION_BOUNDS.items()}
WIDENED = ("float32", "float16", "bfloat16")  # measured against the reference run in float64


def tensor_leaves(value: Any) -> list:
    """The tensors of an output in a fixed order (dict entries by key): how two outputs of one
    structure are paired tensor by tensor."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensor_leaves(v)]
    if isinstance(value, dict):
        return [t for k in sorted(value, key=str) for t in tensor_leaves(value[k])]
    return []


def map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    """``value`` with ``fn`` applied to each of its tensors, its tuples, lists and dicts rebuilt
    around the results as the same types (namedtuples and subclasses too: the comparison requires
    the same container types on both sides); other values are left as they are."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [map_tensors(fn, v) for v in value]
        if hasattr(value, "_fields"):  # a namedtuple takes its fields one by one
            return type(value)(*items)
        try:
            return type(value)(items)
        except TypeError:  # a tuple type that cannot be rebuilt from its items becomes a tuple
            return tuple(items)
    if isinstance(value, list):
        rebuilt = copy.copy(value)  # a list subclass stays one
        rebuilt[:] = [map_tensors(fn, v) for v in value]
        return rebuilt
    if isinstance(value, dict):
        rebuilt = copy.copy(value)
        rebuilt.update({k: map_tensors(fn, v) for k, v in value.items()})
        return rebuilt
    return value


def float64_norms(reference: Any, exact: Any) -> dict[str, Any] | None:
    """What the judge needs of ``exact`` (the reference run in float64) to measure the errors of
    the float32, float16 and bfloat16 outputs, computed in the reference's process where both
    outputs live (on the GPU for the cuda backend), in float64 over the places where ``exact`` is
    finite: per dtype, the reference's own error ``||r - exact||`` and ``||exact||``. Numbers
    cross to the judge instead of a float64 copy of the output. An output the model casts back to
    its own dtype even when run in float64 is measured against that all the same: the reference's
    own error then counts as nil, and the floor alone bounds the candidate's. None when the
    structures differ."""
    refs, exacts = tensor_leaves(reference), tensor_leaves(exact)
    if len(refs) != len(exacts):
        return None
    errors: dict[str, list[float]] = {}
    for r, e in zip(refs, exacts):
        name = dtype_name(r.dtype)
        if name not in WIDENED or e.shape != r.shape:
            continue
        own, norm = errors.setdefault(name, [0.0, 0.0])
        for _, r64, e64 in _wide_chunks(r, e):  # bounded memory beside the outputs
            finite = torch.isfinite(e64)
            own = math.hypot(own, float(torch.linalg.vector_norm(torch.where(finite, r64 - e64, 0.0))))
            norm = math.hypot(norm, float(torch.linalg.vector_norm(torch.where(finite, e64, 0.0))))
        errors[name] = [own, norm]
    return {"errors": {k: {"reference": own, "norm": norm} for k, (own, norm) in errors.items()}}


def precision_errors(candidate: Any, reference: Any, norms: Any) -> list[tuple[str, float, float]]:
    """Normwise relative errors of the candidate's and of the reference's own outputs, per
    floating dtype: ``(dtype, candidate's, reference's)``. ``norms`` is ``float64_norms(reference,
    exact)`` (None or malformed: float64 outputs only).

    float64 outputs are measured against the reference's (its own error counted as nil). The
    others against the reference run in float64, the candidate's as its distance from the
    reference's output, ``||c - r|| / ||exact||``, over the places where both are finite (a check
    that passed has the same non-finite values as the reference elsewhere): by the triangle
    inequality that is within the reference's own error of ``||c - exact|| / ||exact||``, and the
    bound it is held to is at least 16 times that error, so it decides as the float64 comparison
    would except near the bound. Tensors unlike the reference's in dtype or shape are left out."""
    return _precision_errors(_tally(candidate, reference, 0.0, 0.0, None, True), norms)


def _precision_errors(tally: _Tally, norms: Any) -> list[tuple[str, float, float]]:
    measured = norms.get("errors") if isinstance(norms, dict) else None
    found = []
    for name, distance in sorted(tally.distance.items()):
        if name == "float64":
            own, norm = 0.0, tally.magnitude[name]
        else:
            entry = measured.get(name) if isinstance(measured, dict) else None
            own, norm = (entry.get("reference"), entry.get("norm")) if isinstance(entry, dict) else (None, None)
        if not all(isinstance(x, float) and math.isfinite(x) for x in (own, norm, distance)) or norm <= 0.0:
            continue
        found.append((name, distance / norm, own / norm))
    return found


def allowed_error(dtype: str, reference_error: float) -> float:
    factor, floor = BOUNDS_BY_NAME[dtype]
    return max(factor * reference_error, floor)


def precision_report(errors: list[tuple[str, float, float]], unmeasured: str | None = None,
                     unchecked: str | None = None) -> dict[str, Any]:
    """What the checks' errors say (``precision_errors``, over every call checked): the check
    nearest its bound or furthest past it, and whether the candidate computed in less than its
    outputs' dtype (its error above the bound on any check). ``unmeasured`` says why a call that
    should have been measured was not (the reference's float64 run ran out of memory): precision
    not measured is precision not paid for. ``unchecked`` says which outputs the task itself
    cannot have measured (the reference cannot run in float64): reported, not held against it."""
    report: dict[str, Any] = {}
    if errors:
        worst = max(errors, key=lambda e: e[1] / allowed_error(e[0], e[2]))
        dtype, candidate, own = worst
        report = {"dtype": dtype, "candidate_error": candidate, "reference_error": own,
                  "allowed": allowed_error(dtype, own),
                  "reduced": any(c > allowed_error(d, r) for d, c, r in errors),
                  "against": "the reference's own float64 output" if dtype == "float64" else "the reference run in float64"}
    if unmeasured:
        report["unmeasured"] = unmeasured
    if unchecked:
        report["unchecked"] = unchecked
    return report
