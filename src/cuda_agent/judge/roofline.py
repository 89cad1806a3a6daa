"""Where a timed forward stands against the device's limits: the roofline.

A speedup over torch.compile says nothing about how much is left. The task's work is known from
the reference process (``floor.count_workload``): FLOPs counted at dispatch, and the bytes a
forward must move at least (its inputs and parameters read once, its outputs written once). With
the device's peak bandwidth and arithmetic rate, each timing becomes achieved FLOP/s and bytes/s,
their fractions of peak, and the fraction of the roofline (the least time the two peaks allow)
that the forward reaches. Which bound applies follows from the task's arithmetic intensity
against the device's ridge point.

Peaks come from a table of known GPUs (NVIDIA's datasheets, dense rates, no sparsity) for the
precision the task computes in: float32 work is held to the CUDA cores' float32 rate, since the
judge pays no speedup for TF32 on a float32 task; 16-bit work to the tensor cores'. For other
GPUs the peaks the judge measures for its physical floor are used (one large copy; a bfloat16
matrix multiply, a tensor-core rate, so float32 work is held to more than its own peak), and the
report says so. On the CPU backend no roofline is drawn.

The least time is the speed of light (SOL) of SOL-ExecBench's score (``sol_score``), given for
each baseline: it says how much of the gap from the baseline to the limit a kernel closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .floor import Peaks

NOT_ON_CPU = ("no roofline on the CPU backend: the judge knows no peak rates for a CPU worth holding a "
              "kernel to")


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    bytes_per_s: float
    flops_per_s: dict[int, float]  # by the precision's bits: 64, 32, 16
    source: str


_DATASHEET = "NVIDIA datasheet, dense"
# Matched in order against the device's name: the more specific names first.
KNOWN_GPUS = (
    ("H200", DevicePeaks("H200 SXM", 4.8e12, {64: 34e12, 32: 67e12, 16: 989.4e12}, _DATASHEET)),
    ("H100 PCIe", DevicePeaks("H100 PCIe", 2.0e12, {64: 26e12, 32: 51e12, 16: 756.5e12}, _DATASHEET)),
    ("H100 NVL", DevicePeaks("H100 NVL", 3.9e12, {64: 30e12, 32: 60e12, 16: 835.5e12}, _DATASHEET)),
    ("H100", DevicePeaks("H100 SXM", 3.35e12, {64: 34e12, 32: 67e12, 16: 989.4e12}, _DATASHEET)),
    ("A100-SXM4-80GB", DevicePeaks("A100 SXM 80GB", 2.039e12, {64: 9.7e12, 32: 19.5e12, 16: 312e12}, _DATASHEET)),
    ("A100", DevicePeaks("A100 40GB", 1.555e12, {64: 9.7e12, 32: 19.5e12, 16: 312e12}, _DATASHEET)),
)
PRECISIONS = {64: "float64", 32: "float32", 16: "16-bit"}


def device_peaks(name: str, measured: Peaks | None) -> DevicePeaks | None:
    """The table's peaks for ``name``, else the measured ones (None if there are none)."""
    for key, peaks in KNOWN_GPUS:
        if key in name:
            return peaks
    if measured is None:
        return None
    rate = measured.flops_per_s
    return DevicePeaks(name, measured.bytes_per_s, {64: rate, 32: rate, 16: rate},
                       "measured here: one large copy and a bfloat16 matmul (a tensor-core rate, above the "
                       "CUDA cores' float32 and float64 peaks)")


def floor_peaks(name: str, measured: Peaks) -> Peaks:
    """The peaks the physical floor divides by: the measured ones, with the datasheet's
    bandwidth where this GPU is in the table and that is higher. A copy timed while other
    processes share the device (the GPU time-slices between them) reads far below the real
    bandwidth, and a low bandwidth would raise the floor above honest kernels."""
    known = device_peaks(name, None)
    if known is None or known.bytes_per_s <= measured.bytes_per_s:
        return measured
    return Peaks(known.bytes_per_s, measured.flops_per_s)


def roofline(workload: dict[str, float], peaks: DevicePeaks, timings_ms: dict[str, float]) -> dict[str, Any]:
    """The roofline of one task on one device, with a point per timing (candidate, eager,
    compile): plain data for the verdict."""
    bits = int(workload.get("float_bits") or 32)
    bits = min(PRECISIONS, key=lambda b: abs(b - bits))  # 8-bit and odd widths: the nearest row
    peak_flops, peak_bytes = peaks.flops_per_s[bits], peaks.bytes_per_s
    flops = workload["flops"]
    moved = workload["input_bytes"] + workload["output_bytes"]
    least_s = max(flops / peak_flops, moved / peak_bytes)
    intensity = flops / moved if moved else None
    ridge = peak_flops / peak_bytes
    points = {}
    for name, ms in timings_ms.items():
        if not ms or ms <= 0:
            continue
        seconds = ms / 1e3
        points[name] = {"ms": ms, "flops_per_s": flops / seconds, "bytes_per_s": moved / seconds,
                        "flops_fraction": flops / seconds / peak_flops, "bytes_fraction": moved / seconds / peak_bytes,
                        "of_roofline": least_s / seconds}
    candidate = timings_ms.get("candidate")
    scores = {name: sol_score(candidate, timings_ms[name], least_s * 1e3) for name in ("eager", "compile")
              if candidate and timings_ms.get(name)}
    return {"drawn": True, "device": peaks.name, "source": peaks.source, "precision": PRECISIONS[bits],
            "peak_flops_per_s": peak_flops, "peak_bytes_per_s": peak_bytes, "flops": flops, "bytes": moved,
            "intensity": intensity, "ridge": ridge,
            "bound": "compute" if intensity is not None and intensity >= ridge else "memory",
            "least_ms": least_s * 1e3, "points": points, "sol_score": scores}


def sol_score(t_kernel: float, t_baseline: float, t_sol: float) -> float | None:
    """SOL-ExecBench's score, ``1 / (1 + (T_k - T_sol) / (T_b - T_sol))``: how much of the gap
    between a baseline's time and the least time the device's peaks allow (the speed of light)
    the kernel closes. 0.5 at the baseline's time, 1 at the limit, towards 0 as it slows. A time
    at or below the limit scores 1: the limit is an estimate (FLOPs as torch counts them, every
    input read once), which a kernel skipping redundant work can beat, and the physical floor,
    which counts the outputs alone, does not refuse such a time. None where the baseline is at the
    limit already (no gap to close)."""
    if not t_baseline > t_sol or not t_kernel > 0:
        return None
    return 1.0 / (1.0 + (max(t_kernel, t_sol) - t_sol) / (t_baseline - t_sol))


def not_drawn(why: str) -> dict[str, Any]:
    return {"drawn": False, "why": why}


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def render(roof: dict[str, Any]) -> list[str]:
    """Lines for the verdict's feedback and the agent's profile output."""
    if not roof:
        return []
    if not roof.get("drawn"):
        return [f"roofline: not drawn ({roof.get('why', 'no workload measured')})"]
    intensity = f"{roof['intensity']:.3g} FLOP/B" if roof["intensity"] is not None else "no bytes"
    lines = [f"roofline on {roof['device']} ({roof['source']}): {_si(roof['flops'], 'FLOP')} and at least "
             f"{_si(roof['bytes'], 'B')} moved, {roof['bound']}-bound ({intensity} against a ridge of "
             f"{roof['ridge']:.3g} for {roof['precision']}); the roofline allows {roof['least_ms']:.4g} ms"]
    for name, p in roof["points"].items():
        lines.append(f"  {name} {p['ms']:.4g} ms: {_si(p['bytes_per_s'], 'B/s')} ({p['bytes_fraction']:.0%} of "
                     f"{_si(roof['peak_bytes_per_s'], 'B/s')}), {_si(p['flops_per_s'], 'FLOP/s')} "
                     f"({p['flops_fraction']:.0%} of {_si(roof['peak_flops_per_s'], 'FLOP/s')}): "
                     f"{p['of_roofline']:.0%} of the roofline")
    scores = {name: score for name, score in (roof.get("sol_score") or {}).items() if score is not None}
    if scores:
        lines.append("  SOL score (0.5 at the baseline, 1 at the limit): " + ", ".join(
            f"{score:.3f} against {'torch.compile' if name == 'compile' else name}" for name, score in scores.items()))
    return lines
