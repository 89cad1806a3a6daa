"""Timing sessions: what was measured, its summary, and whether it can be believed.

Each timed call is measured in the worker from just before ``forward`` until a device-wide
synchronisation returns, so work on any stream, on the CPU, or in launch overhead counts: the
time a user would feel. CUDA events around the same call give the device-side time.

The judge also times every step of the session on its own clock: ``prepare`` (inputs, cache
flush) and ``go`` (the call, plus the channel's latency). A worker cannot make its calls look
shorter without the difference showing up in one of those, so both are compared with the same
steps of the trusted reference process in the same run.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

# How far a candidate's untimed overheads may exceed the reference's before its timing is not
# believed: a multiple of the reference's overhead plus an absolute allowance, both covering
# scheduling noise between two processes doing the same work. On the CPU backend these steps
# are dominated by host memory work (fresh inputs, copies of outputs), which two processes do
# at systematically different speeds: 1.5x (prepare) and 2.3x (channel) were measured for an
# honest 64 MB output, so the CPU factors are wider.
CHANNEL_FACTOR, CHANNEL_ALLOWANCE_MS = 2.0, 0.05
PREPARE_FACTOR, PREPARE_ALLOWANCE_MS = 1.5, 0.1
CPU_CHANNEL_FACTOR, CPU_PREPARE_FACTOR = 3.0, 2.0


@dataclass
class Session:
    """Per-call measurements of one timing session (timed calls only)."""

    host_ms: list[float] = field(default_factory=list)     # the worker's clock around the call
    device_ms: list[float] = field(default_factory=list)   # CUDA events around the call
    prepare_ms: list[float] = field(default_factory=list)  # judge's clock: the prepare step
    go_ms: list[float] = field(default_factory=list)       # judge's clock: the go step
    threads_grown: int = 0    # timed calls that returned with more threads than they started with

    @property
    def channel_ms(self) -> list[float]:
        """Time inside each go step that the worker's own clock did not count."""
        return [g - h for g, h in zip(self.go_ms, self.host_ms)]


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
    prepare_median_ms: float | None = None
    channel_median_ms: float | None = None
    source: str = "measured"      # measured | cache
    samples_ms: list[float] | None = None   # every timed call, when the judge keeps them

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

    @classmethod
    def from_session(cls, session: Session, keep_samples: bool = False) -> "TimingStats":
        stats = cls.from_samples(session.host_ms, session.device_ms)
        stats.samples_ms = list(session.host_ms) if keep_samples else None
        stats.prepare_median_ms = statistics.median(session.prepare_ms) if session.prepare_ms else None
        stats.channel_median_ms = statistics.median(session.channel_ms) if session.go_ms else None
        return stats


def consistency_problem(session: Session) -> str | None:
    """Why a session's own numbers cannot be true, or None when they are plausible.

    Every call takes positive time; the worker's time for a call cannot exceed the judge's time
    for the step around it; device time inside a call cannot exceed the host time around it.
    """
    if not session.host_ms:
        return "no timed calls were reported"
    if any(not (t > 0) for t in session.host_ms):
        return "a timed call reported a non-positive duration"
    for host, go in zip(session.host_ms, session.go_ms):
        if host > go + 0.02:
            return f"a call reported {host:.3f} ms inside a step the judge measured at {go:.3f} ms"
    for host, device in zip(session.host_ms, session.device_ms):
        if device > host * 1.05 + 0.05:
            return f"a call reported {device:.3f} ms on the device but {host:.3f} ms on the host"
    return None


def integrity_problem(candidate: Session, reference: Session | list[Session], backend: str = "cuda") -> str | None:
    """Why the candidate's session cannot be believed, judged against the reference's session.

    A call reported shorter than it was leaves unexplained time in the go step (the channel);
    work moved out of the call into the untimed prepare step makes that step longer. Either,
    beyond what the reference shows for the same steps plus noise, fails the timing. Given
    several reference sessions (one per attempt), the smallest overheads among them set the
    bound, so timing again never loosens it.
    """
    references = reference if isinstance(reference, list) else [reference]
    channel_factor, prepare_factor = ((CPU_CHANNEL_FACTOR, CPU_PREPARE_FACTOR) if backend == "cpu"
                                      else (CHANNEL_FACTOR, PREPARE_FACTOR))
    channels = [statistics.median(r.channel_ms) for r in references if r.go_ms]
    if candidate.go_ms and channels:
        cand, ref = statistics.median(candidate.channel_ms), min(channels)
        if cand > ref * channel_factor + CHANNEL_ALLOWANCE_MS:
            return (f"each call took {cand:.3f} ms longer than the candidate's own clock says "
                    f"(the reference: {ref:.3f} ms)")
    prepares = [statistics.median(r.prepare_ms) for r in references if r.prepare_ms]
    if candidate.prepare_ms and prepares:
        cand, ref = statistics.median(candidate.prepare_ms), min(prepares)
        if cand > ref * prepare_factor + PREPARE_ALLOWANCE_MS:
            return (f"preparing each call took {cand:.3f} ms against the reference's {ref:.3f} ms for "
                    "the same inputs: work is being done outside the timed calls")
    return None
