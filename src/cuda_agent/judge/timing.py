"""Summarise per-call timings, and cross-check them against the judge's own clock.

Each timed call is measured on the host from just before ``forward`` until a device-wide
synchronisation returns, so work on any stream, on the CPU, or in launch overhead is counted:
the time a user would feel. CUDA events around the same call give a device-side number that must
not exceed it.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass


@dataclass
class TimingStats:
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    p25_ms: float
    p75_ms: float
    calls: int
    device_median_ms: float | None = None
    source: str = "measured"      # measured | cache

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.p75_ms - self.p25_ms) / self.median_ms if self.median_ms > 0 else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "spread": self.spread}

    @classmethod
    def from_dict(cls, data: dict) -> "TimingStats":
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})

    @classmethod
    def from_samples(cls, host_ms: list[float], device_ms: list[float] | None = None) -> "TimingStats":
        if not host_ms:
            raise ValueError("no timed calls")
        ordered = sorted(host_ms)
        q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
        return cls(
            median_ms=statistics.median(ordered),
            mean_ms=statistics.fmean(ordered),
            std_ms=statistics.pstdev(ordered) if len(ordered) > 1 else 0.0,
            min_ms=ordered[0],
            max_ms=ordered[-1],
            p25_ms=q[0],
            p75_ms=q[2],
            calls=len(ordered),
            device_median_ms=statistics.median(device_ms) if device_ms else None,
        )


def consistency_problem(host_ms: list[float], device_ms: list[float], judge_wall_ms: float) -> str | None:
    """Why the reported timings cannot be true, or None when they are plausible.

    The judge measures the whole timing request with its own clock; the calls inside it cannot
    add up to more than that. Device time inside a call cannot exceed the host time around it.
    """
    if any(not (t > 0) for t in host_ms):
        return "a timed call reported a non-positive duration"
    if sum(host_ms) > judge_wall_ms * 1.02 + 1.0:
        return (f"the worker reported {sum(host_ms):.1f} ms of calls inside a request the judge "
                f"measured at {judge_wall_ms:.1f} ms")
    for host, device in zip(host_ms, device_ms):
        if device > host * 1.05 + 0.05:
            return f"a call reported {device:.3f} ms on the device but {host:.3f} ms on the host"
    return None
