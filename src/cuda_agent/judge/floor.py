"""The physical floor: no correct forward can take less time than writing its output to memory
at the device's peak bandwidth.

A time below the floor means the clock was fooled, whatever the other checks said, so it fails
closed (``impossible_time``). The floor is deliberately generous (``SLACK``): outputs may stay in
cache, and the bandwidth is measured with one plain copy. The reference's floating-point
operations are counted and reported, but they bound nothing: a solution may do less arithmetic
than the reference (an algebraic shortcut, such as scaling rows instead of multiplying by a
diagonal matrix), and that is a real speedup the reward must pay. Peaks are measured once per
device by a trusted reference process and cached by the judge; the task's workload (FLOPs counted
by torch's FLOP counter, output bytes) is measured by the reference process too, never by the
candidate, and cached per task.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

SLACK = 4.0
WORKLOAD = ("flops", "output_bytes", "input_bytes", "float_bits")  # what ``count_workload`` measures


@dataclass(frozen=True)
class Peaks:
    bytes_per_s: float     # device memory bandwidth (read + write of a large copy)
    flops_per_s: float     # dense matrix-multiply rate at the lowest precision measured

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _best_seconds(fn: Callable[[], Any], sync: Callable[[], None], reps: int) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_peaks(device: str) -> Peaks:
    """Measure bandwidth and matmul rate here (run in a reference worker)."""
    import torch

    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    nbytes = (512 if cuda else 128) * 1024**2
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda: dst.copy_(src), sync, 10)
    bandwidth = 2 * nbytes / seconds
    n = 8192 if cuda else 1024
    dtype = torch.bfloat16 if cuda else torch.float32
    a = torch.ones(n, n, dtype=dtype, device=device)
    seconds = _best_seconds(lambda: a @ a, sync, 5)
    flops = 2 * n**3 / seconds
    if not cuda:  # the worker measures one thread; a candidate's C++ may use every core
        cores = len(os.sched_getaffinity(0)) or 1
        bandwidth, flops = bandwidth * min(cores, 4), flops * cores
    return Peaks(bandwidth, flops)


def count_workload(model: Any, inputs: list[Any], outputs: list[Any]) -> dict[str, float]:
    """FLOPs of one forward (counted at dispatch), bytes of its output tensors, bytes it reads
    at least (its input tensors, parameters and buffers) and the bits of its floating-point
    outputs (the precision it computes in; 0 if none)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    size = lambda t: t.numel() * t.element_size()  # noqa: E731
    read = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    floats = [t for t in outputs if t.is_floating_point()]
    return {"flops": float(counter.get_total_flops()), "output_bytes": float(sum(size(t) for t in outputs)),
            "input_bytes": float(sum(size(t) for t in read)),
            "float_bits": float(floats[0].element_size() * 8) if floats else 0.0}


def floor_ms(workload: dict[str, float], peaks: Peaks, slack: float = SLACK) -> float:
    """The least time, in milliseconds, that a correct forward can take on this device: its
    output written at peak bandwidth, divided by ``slack``."""
    return workload["output_bytes"] / peaks.bytes_per_s / slack * 1e3
