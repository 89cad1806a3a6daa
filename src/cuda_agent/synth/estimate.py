"""A roofline estimate of a task's eager time on a target GPU, computed on the meta device.

Used to size composed tasks for the workload window, and as the workload filter's measurement
when no GPU is present. Every ATen op that eager mode would launch is counted once: its time is
the larger of FLOPs over the target's compute rate and bytes moved (its tensor inputs and
outputs) over its memory bandwidth, plus a fixed launch-and-dispatch overhead. Views cost nothing.
Nothing is allocated or computed, so it takes milliseconds on any machine.

The H100 numbers are what eager PyTorch reaches there, not the datasheet's peaks: fp32 GEMMs run
on CUDA cores (TF32 is off for matmul by default, on for cuDNN convolutions), and a simple kernel
streams at about 85% of HBM3's 3.35 TB/s.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass(frozen=True)
class GpuProfile:
    name: str
    matmul_flops: float      # fp32 GEMM, FLOP/s
    conv_flops: float        # convolutions (TF32 through cuDNN), FLOP/s
    bandwidth: float         # bytes/s
    launch_s: float          # per-kernel launch and eager dispatch overhead


H100 = GpuProfile("H100 (estimate)", matmul_flops=50e12, conv_flops=150e12, bandwidth=2.8e12, launch_s=6e-6)
PROFILES = {"h100": H100}


@dataclass(frozen=True)
class Estimate:
    ms: float
    flops: float
    bytes: float
    kernels: int
    largest_tensor_bytes: int = 0   # the biggest tensor any op reads or writes: a memory bound

    def to_dict(self) -> dict[str, Any]:
        return {"ms": self.ms, "flops": self.flops, "bytes": self.bytes, "kernels": self.kernels,
                "largest_tensor_bytes": self.largest_tensor_bytes}


_CONV_OPS = {"convolution", "_convolution", "cudnn_convolution", "convolution_backward"}


def _flop_counter(packet) -> Callable | None:
    try:
        from torch.utils.flop_counter import flop_registry
    except ImportError:  # very old torch: count bytes only
        return None
    return flop_registry.get(packet)


class _CostMode(TorchDispatchMode):
    def __init__(self, profile: GpuProfile):
        super().__init__()
        self.profile = profile
        self.seconds = 0.0
        self.flops = 0.0
        self.bytes = 0.0
        self.kernels = 0
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if getattr(func, "is_view", False) or func.overloadpacket.__name__ in ("detach", "alias"):
            return out
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        tensors += [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        sizes = [t.numel() * t.element_size() for t in tensors]
        moved = float(sum(sizes))
        self.largest = max([self.largest, *sizes])
        flops = 0.0
        counter = _flop_counter(func.overloadpacket)
        if counter is not None:
            try:
                flops = float(counter(*args, **kwargs, out_val=out))
            except Exception:  # a formula that does not fit these arguments: count bytes only
                flops = 0.0
        rate = (self.profile.conv_flops if func.overloadpacket.__name__ in _CONV_OPS
                else self.profile.matmul_flops)
        self.seconds += max(flops / rate, moved / self.profile.bandwidth) + self.profile.launch_s
        self.flops += flops
        self.bytes += moved
        self.kernels += 1
        return out


def estimate_forward(model: torch.nn.Module, inputs: list, profile: GpuProfile = H100) -> Estimate:
    """The estimated eager time of ``model(*inputs)``. Both should live on the meta device."""
    with torch.no_grad(), _CostMode(profile) as mode:
        model(*inputs)
    return Estimate(ms=mode.seconds * 1e3, flops=mode.flops, bytes=mode.bytes, kernels=mode.kernels,
                    largest_tensor_bytes=mode.largest)


def fit_batch(estimate_at: Callable[[int], Estimate], target_ms: float, max_tensor_bytes: int,
              base: int = 8, max_batch: int = 1 << 20, rounds: int = 4) -> tuple[int, Estimate] | None:
    """The batch size whose estimate comes closest to ``target_ms`` without any tensor growing past
    ``max_tensor_bytes``; None when even ``base`` breaks the memory bound.

    Time is close to affine in the batch (a fixed launch cost plus a part that scales), so a few
    secant steps find it; memory is kept under the bound at every step.
    """
    low = estimate_at(base)
    if low.largest_tensor_bytes > max_tensor_bytes:
        return None
    best = (base, low)
    a_batch, a = base, low
    b_batch = min(max_batch, base * 64)
    for _ in range(rounds):
        if a.largest_tensor_bytes:  # memory grows at most linearly in the batch for most chains
            b_batch = min(b_batch, int(a_batch * max_tensor_bytes / a.largest_tensor_bytes))
        b_batch = max(1, min(max_batch, b_batch))
        b = estimate_at(b_batch)
        while b.largest_tensor_bytes > max_tensor_bytes and b_batch > 1:
            b_batch = max(1, b_batch // 2)
            b = estimate_at(b_batch)
        if b.largest_tensor_bytes <= max_tensor_bytes and \
                abs(math.log(max(b.ms, 1e-9) / target_ms)) < abs(math.log(max(best[1].ms, 1e-9) / target_ms)):
            best = (b_batch, b)
        if abs(b.ms - target_ms) < 0.05 * target_ms or b_batch == a_batch:
            break
        slope = (b.ms - a.ms) / (b_batch - a_batch)
        if slope <= 0:
            break
        a_batch, a = b_batch, b
        b_batch = int(round(a_batch + (target_ms - a.ms) / slope))
        if b_batch < 1:
            break
    return best


@dataclass(frozen=True)
class ComposeSettings:
    window_ms: tuple[float, float] = (1.0, 100.0)
    max_tensor_bytes: int = 1 << 30
    profile: GpuProfile = H100
    # Shares of the offline composer's tasks that declare several workloads (other batch sizes,
    # held-out ones allowed: docs/workloads.md), and that compute in bfloat16 or float16.
    multi_shape_share: float = 0.0
    half_share: float = 0.0

    def target_range(self) -> tuple[float, float]:
        """Aim inside the window with margin for the estimate's error: [2 x min, max / 2.5]."""
        low, high = self.window_ms
        lo, hi = low * 2, high / 2.5
        return (lo, hi) if lo <= hi else (math.sqrt(low * high),) * 2

    def draw_target(self, rng: random.Random) -> float:
        lo, hi = self.target_range()
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))
