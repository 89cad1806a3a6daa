"""What the records from a candidate's ``forward`` mean: the runtime rules, decided in the judge.

The candidate process reports which ATen ops it dispatched, which GPU kernels ran and how long,
its thread count around each call, and its global numerics flags (``recording.py``). Here those
records become violations:

* ``dispatched_compute``: any ATen op that is not allocation, a view, metadata or a copy.
* ``own_kernels_idle``: the solution defines ``__global__`` kernels and none of them ran.
* ``unattributed_kernels``: more than ``UNATTRIBUTED_SHARE`` of the forward's GPU time went to
  kernels launched outside any ATen op that are neither the solution's own (by name) nor, where
  the solution calls cuBLAS or cuDNN, the library's. ``at::native`` kernels launched that way
  can only come from calling ATen's internals directly.
* ``thread_left_running``: more threads after a call than before it.
* ``flags_changed``: global numerics settings differ from those before the solution loaded.
* ``library_compute``: more than ``LIBRARY_SHARE`` of the CPU time of the calls the judge
  sampled (its own record, ``cpu_samples``; calls made as timed calls are) in code that computes
  and is not the solution's: another library's, ATen's kernels however they were reached, or
  code no file backs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..solution import Solution
from .static_checks import kernel_inventory
from .verdict import Violation

if TYPE_CHECKING:
    from .cpu_samples import SampleCount

# ATen ops a solution may dispatch in forward: making tensors, views, metadata, copies. (The op
# counter also sees ops that composite ops dispatch inside, such as the conjugate and negative
# bits resolved when a tensor's data is exposed: metadata too.)
ALLOWED_OPS = frozenset(f"aten::{name}" for name in """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
    ones_like new_ones full full_like new_full fill_ zero_ arange scalar_tensor lift_fresh
    lift_fresh_copy detach detach_ alias view _unsafe_view reshape _reshape_alias view_as
    as_strided expand expand_as permute transpose t squeeze unsqueeze flatten unflatten select
    slice narrow split split_with_sizes chunk unbind movedim diagonal unfold view_as_real
    view_as_complex contiguous clone copy_ _to_copy to _copy_from _copy_from_and_resize resize_
    set_ _local_scalar_dense item record_stream size stride sym_size sym_stride numel dim
    is_contiguous is_same_size _has_compatible_shallow_copy_type resolve_conj resolve_neg conj _conj
    _neg_view is_conj is_neg
""".split())

UNATTRIBUTED_SHARE = 0.10
# The share of the sampled calls' CPU samples in another library's code, ATen's compute kernels or
# code no file backs above which they did the work, and the fewest samples that decide it (an
# honest solution's share is nil: the copies and fills it may dispatch are not counted).
LIBRARY_SHARE = 0.25
MIN_LIBRARY_SAMPLES = 8
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _kernel_identifiers(name: str) -> set[str]:
    """Identifiers in a demangled kernel name before its argument list (template args too)."""
    return set(_IDENT.findall(name.replace("(anonymous namespace)", " ").split("(", 1)[0]))


def forbidden_ops(ops: dict[str, int]) -> list[str]:
    return sorted(op for op in ops if op not in ALLOWED_OPS)


def assess_ops(ops: dict[str, int], where: str) -> list[Violation]:
    bad = forbidden_ops(ops)
    if not bad:
        return []
    listed = ", ".join(f"{op} x{ops[op]}" for op in bad[:8])
    return [Violation("dispatched_compute", where, None,
                      f"forward dispatched PyTorch compute ops: {listed}. Only allocation, views, "
                      "metadata and copies may go through PyTorch; compute in your own kernels.")]


def _is_own(kernel: dict[str, Any], own: set[str]) -> bool:
    """Whether the solution launched this kernel itself and it is one of its ``__global__``s."""
    return not kernel["op"] and bool(_kernel_identifiers(kernel["name"]) & own)


def own_kernels_missing(kernels: list[dict[str, Any]], solution: Solution) -> bool:
    """Whether the solution defines kernels and the record holds none of them."""
    own = kernel_inventory(solution).kernels
    return bool(own) and not any(_is_own(k, own) for k in kernels)


def assess_kernels(kernels: list[dict[str, Any]], solution: Solution, where: str) -> list[Violation]:
    inventory = kernel_inventory(solution)
    own, library = inventory.kernels, inventory.calls_library
    total = sum(k["device_ms"] for k in kernels) or 0.0
    ran_own = False
    unattributed: dict[str, float] = {}
    for kernel in kernels:
        if kernel["op"]:
            continue  # launched by an ATen op: judged by its op (assess_ops)
        identifiers = _kernel_identifiers(kernel["name"])
        if identifiers & own:  # as _is_own, on the identifiers this loop needs anyway
            ran_own = True
        elif library and "native" not in identifiers:
            continue
        else:
            unattributed[kernel["name"]] = unattributed.get(kernel["name"], 0.0) + kernel["device_ms"]
    violations = []
    if own and not ran_own:
        violations.append(Violation("own_kernels_idle", where, None,
                                    f"the solution defines kernels ({', '.join(sorted(own)[:6])}) but none of "
                                    "them ran during forward; the work must be done by your kernels"))
    share = sum(unattributed.values()) / total if total else 0.0
    if share > UNATTRIBUTED_SHARE:
        names = ", ".join(name.split("(", 1)[0][:80] for name in sorted(unattributed, key=unattributed.get,
                                                                       reverse=True)[:3])
        violations.append(Violation("unattributed_kernels", where, None,
                                    f"{share:.0%} of forward's GPU time ran in kernels that are not the "
                                    f"solution's own: {names}"))
    return violations


def assess_threads(before: int, after: int, where: str) -> list[Violation]:
    if after <= before:
        return []
    return [Violation("thread_left_running", where, None,
                      f"forward returned with {after - before} more thread(s) running than when it was "
                      "called; work must finish before forward returns")]


def assess_flags(before: dict[str, Any], after: dict[str, Any], where: str) -> list[Violation]:
    changed = sorted(k for k in before if after.get(k) != before[k])
    if not changed:
        return []
    listed = ", ".join(f"{k}: {before[k]!r} -> {after.get(k)!r}" for k in changed)
    return [Violation("flags_changed", where, None,
                      f"global numerics settings changed: {listed}. Leave torch's global settings alone.")]


def assess_cpu_samples(count: "SampleCount", where: str) -> list[Violation]:
    """``library_compute`` where code that is not the solution's took more than its share of the
    sampled calls."""
    if count.samples < MIN_LIBRARY_SAMPLES or count.library_share <= LIBRARY_SHARE:
        return []
    places = {**{Path(f).name: n for f, n in count.files.items()},
              **{f"ATen's {k}": n for k, n in count.kernels.items()}}
    if count.unbacked:
        places["code no file backs"] = count.unbacked
    named = ", ".join(sorted(places, key=places.get, reverse=True)[:3])
    return [Violation("library_compute", where, None,
                      f"{count.library_share:.0%} of the sampled calls' CPU time ran in code that is not the "
                      f"solution's ({named}; {count.foreign} of {count.samples} samples). Compute in your own "
                      "kernels; PyTorch's kernels (however they are reached), NumPy, SciPy, BLAS and other "
                      "packages may not do the work.")]
