"""Timing sessions: what was measured, the figure the reward uses, and whether it can be believed.

**The figure.** On the cuda backend each timed call is bracketed by CUDA events, and the events
are queued behind a device-side wait (the *window*) that lasts longer than the host's own path
through the call: Python, the binding, the launches. While the device waits, the host queues the
call's work, so the events see the device's work and none of the harness (no Python overhead, no
synchronisation latency), as a user's pipelined loop sees it. The window is sized per session
from the warm-up calls' host path, the same rule for every model. Host time the window does not
cover (a call whose host path grows, work waiting on the host mid-call) still shows between the
events. On the cpu backend the figure is the host clock around the call, which is the work.

**The cross-checks.** The worker's host clock runs from before the window until a device-wide
synchronisation returns: it bounds every stream's work, and what it measured beyond the window,
the device time and the call's host path is unexplained (``gap``). The judge times every step of
the session on its own clock: ``prepare`` (inputs, cache flush) and ``go`` (the call, plus the
channel's latency). A worker cannot make its calls look shorter without the difference showing
up in one of those, and each is compared with the same steps of the trusted reference process,
timed interleaved with the candidate so that both see the same load.

**Stability.** A session goes on until its median is known to ``precision`` (the half-width of a
95% confidence interval of the median, relative to it) or its call budget is spent; a session
whose median is less certain than ``MAX_UNCERTAINTY`` is not believed (the machine is too noisy),
and the verdict says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import TimingConfig

# How far a candidate's untimed overheads may exceed the reference's before its timing is not
# believed: a multiple of the reference's overhead plus an absolute allowance, both covering
# scheduling noise between two processes doing the same work. On the CPU backend these steps
# are dominated by host memory work (fresh inputs, copies of outputs), which two processes do
# at systematically different speeds: 1.5x (prepare) and 2.3x (channel) were measured for an
# honest 64 MB output, so the CPU factors are wider.
CHANNEL_FACTOR, CHANNEL_ALLOWANCE_MS = 2.0, 0.05
PREPARE_FACTOR, PREPARE_ALLOWANCE_MS = 1.5, 0.1
CPU_CHANNEL_FACTOR, CPU_PREPARE_FACTOR = 3.0, 2.0
# On a shared host these steps also grow with the length of the call before them: the longer a
# worker's call, the colder its data and the core for the steps that follow (other tenants' work
# evicts it meanwhile). Measured on a 2-core virtual machine, with a 95 ms call (an honest
# insertion sort) against a 3.5 ms reference call: the candidate's prepare step 1.5-3 ms longer
# than the reference's typically (its private flush alone 3x slower), 6-10 ms at times, and its
# channel 2-3 ms longer; bare processes exchanging messages around a busy call lose 0.2-1% of the
# call's length in the exchange. So on the cpu backend each step may also exceed the reference's
# by this fraction of the candidate's median call: work hidden in one is worth at most that much
# speed, within the uncertainty the cpu figure itself is allowed (MAX_UNCERTAINTY).
CPU_UNTIMED_FRACTION = 0.05
# CPU time a worker may use between its prepare step and its go, on average per call: the tail
# of its reply and its return to waiting, microseconds honestly. Beyond it, a thread of its own
# worked while it was not being timed (cpu backend).
BACKGROUND_CPU_ALLOWANCE_MS, BACKGROUND_CPU_FRACTION = 0.1, 0.02
# The host clock beyond window, device time and host path: launch and wake-up latency.
GAP_FACTOR, GAP_ALLOWANCE_MS = 2.0, 0.05

# The window: this many times the warm-up calls' host path, plus a margin, within bounds.
WINDOW_FACTOR, WINDOW_MARGIN_MS = 2.0, 0.02
WINDOW_MIN_MS, WINDOW_MAX_MS = 0.05, 50.0

# Median precision a session aims for, per backend (relative half-width of its 95% interval),
# the most uncertainty a figure may have and still be believed, and how far apart the medians of
# baseline sessions in fresh processes may be.
PRECISION = {"cuda": 0.01, "cpu": 0.03}
MAX_UNCERTAINTY = {"cuda": 0.05, "cpu": 0.15}
BASELINE_TOLERANCE = {"cuda": 0.02, "cpu": 0.08}
# Fresh processes a baseline is timed in at first. Device events put the medians of two fresh
# processes within 0.1% of each other on the H100 (docs/benchmarks.md), so one will do there;
# host timing on a shared CPU machine moves more from process to process.
BASELINE_SESSIONS = {"cuda": 1, "cpu": 2}


@dataclass
class Session:
    """Per-call measurements of one timing session (timed calls only)."""

    host_ms: list[float] = field(default_factory=list)     # worker's clock: window, call, sync
    device_ms: list[float] = field(default_factory=list)   # CUDA events around the call
    call_ms: list[float] = field(default_factory=list)     # worker's clock: the call until it returns
    window_ms: list[float] = field(default_factory=list)   # CUDA events: the wait before each call
    prepare_ms: list[float] = field(default_factory=list)  # judge's clock: the prepare step
    go_ms: list[float] = field(default_factory=list)       # judge's clock: the go step
    threads_grown: int = 0    # timed calls that returned with more threads than they started with
    # The worker's CPU time between each prepare step's end and its go, while its timing thread
    # waits: what its other threads did untimed (cpu backend).
    background_cpu_ms: list[float] = field(default_factory=list)
    # How long the worker's stepping thread waited for a CPU while ready to run, in each prepare
    # step and each go step (the kernel's count; empty where it keeps none).
    prepare_wait_ms: list[float] = field(default_factory=list)
    go_wait_ms: list[float] = field(default_factory=list)
    # The same for the judge's own thread, which times those steps: a judge that waited for a CPU
    # when the reply came saw it late, and the step looks longer by that (empty where not counted).
    judge_prepare_wait_ms: list[float] = field(default_factory=list)
    judge_go_wait_ms: list[float] = field(default_factory=list)

    def less_waiting(self, cost: float = 1.0) -> "Session | None":
        """This session with ``cost`` times the time each step waited for a CPU (the worker's
        thread and the judge's, where the judge's was counted) taken out of the judge's step
        times, or None where the worker's waits were not counted."""
        if len(self.prepare_wait_ms) != len(self.prepare_ms) or len(self.go_wait_ms) != len(self.go_ms):
            return None

        def waits(worker: list[float], judge: list[float]) -> list[float]:
            return [w + j for w, j in zip(worker, judge)] if len(judge) == len(worker) else worker

        return replace(self, prepare_ms=[p - cost * w for p, w in zip(
                           self.prepare_ms, waits(self.prepare_wait_ms, self.judge_prepare_wait_ms))],
                       go_ms=[g - cost * w for g, w in zip(self.go_ms, waits(self.go_wait_ms, self.judge_go_wait_ms))])

    @property
    def wait_median_ms(self) -> float | None:
        """The median time a call's prepare and go steps waited for a CPU, together."""
        return _median_of_sums(self.prepare_wait_ms, self.go_wait_ms)

    @property
    def judge_wait_median_ms(self) -> float | None:
        """The same for the judge's own thread, as it timed those steps."""
        return _median_of_sums(self.judge_prepare_wait_ms, self.judge_go_wait_ms)

    @property
    def background_cpu_mean_ms(self) -> float | None:
        return statistics.fmean(self.background_cpu_ms) if self.background_cpu_ms else None

    @property
    def figure_ms(self) -> list[float]:
        """What each call cost, as the reward counts it: device time where there is a device."""
        return self.device_ms if self.device_ms else self.host_ms

    @property
    def channel_ms(self) -> list[float]:
        """Time inside each go step that the worker's own clock did not count."""
        return [g - h for g, h in zip(self.go_ms, self.host_ms)]

    @property
    def gap_ms(self) -> list[float]:
        """Host time of each call beyond the window, its device time and its host path."""
        if not self.device_ms:
            return []
        return [h - max(w, c) - d for h, c, d, w in zip(self.host_ms, self.call_ms, self.device_ms, self.window_ms)]


def _median_of_sums(first: list[float], second: list[float]) -> float | None:
    sums = [a + b for a, b in zip(first, second)]
    return statistics.median(sums) if sums else None


def median_interval(samples: list[float]) -> float:
    """Relative half-width of a 95% confidence interval of the median (order statistics)."""
    n = len(samples)
    if n < 5:
        return math.inf
    ordered = sorted(samples)
    half = 1.96 * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half))
    median = statistics.median(ordered)
    return (ordered[hi] - ordered[lo]) / 2 / median if median > 0 else math.inf


def window_for(call_ms: list[float]) -> float:
    """The device-side wait for a session, from the host path of its last warm-up calls (their
    median: a first call that loads libraries or compiles is not what the timed calls will do)."""
    recent = statistics.median(call_ms[-3:]) if call_ms else 0.0
    wanted = WINDOW_FACTOR * recent + WINDOW_MARGIN_MS
    return min(WINDOW_MAX_MS, max(WINDOW_MIN_MS, wanted))


@dataclass
class TimingStats:
    median_ms: float              # the figure the reward uses (device time on cuda, host on cpu)
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
    method: str = "host_clock"    # device_events (cuda) | host_clock (cpu)
    host_median_ms: float | None = None     # the worker's clock: window, call, synchronisation
    call_median_ms: float | None = None     # host path: the call until it returned
    gap_median_ms: float | None = None
    window_ms: float | None = None
    precision: float | None = None          # relative half-width of the median's 95% interval
    sessions_ms: list[float] | None = None  # baselines: the median of each fresh process
    stable: bool | None = None    # baselines: whether those medians agree within the tolerance

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
    def from_samples(cls, figure_ms: list[float], device_ms: list[float] | None = None) -> "TimingStats":
        if not figure_ms:
            raise ValueError("no timed calls")
        ordered = sorted(figure_ms)
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
            precision=_finite_or_none(median_interval(ordered)),
        )

    @classmethod
    def from_session(cls, session: Session, keep_samples: bool = False) -> "TimingStats":
        stats = cls.from_samples(session.figure_ms, session.device_ms)
        stats.method = "device_events" if session.device_ms else "host_clock"
        stats.samples_ms = list(session.figure_ms) if keep_samples else None
        stats.host_median_ms = statistics.median(session.host_ms)
        stats.call_median_ms = statistics.median(session.call_ms) if session.call_ms else None
        stats.gap_median_ms = statistics.median(session.gap_ms) if session.gap_ms else None
        stats.window_ms = statistics.median(session.window_ms) if session.window_ms else None
        stats.prepare_median_ms = statistics.median(session.prepare_ms) if session.prepare_ms else None
        stats.channel_median_ms = statistics.median(session.channel_ms) if session.go_ms else None
        return stats

    @classmethod
    def pooled(cls, sessions: list["TimingStats"]) -> "TimingStats":
        """One baseline from sessions in several fresh processes: the session whose median is
        the median of theirs, with every session's median recorded beside it."""
        ordered = sorted(sessions, key=lambda s: s.median_ms)
        middle = ordered[(len(ordered) - 1) // 2]
        median = statistics.median(s.median_ms for s in sessions)
        calls = sum(s.calls for s in sessions)
        # The range and quartiles span every session, so they still bracket the pooled median
        # (with two sessions it lies between theirs, outside either one's own range).
        return cls.from_dict({**asdict(middle), "sessions_ms": [s.median_ms for s in sessions],
                              "median_ms": median, "calls": calls,
                              "mean_ms": sum(s.mean_ms * s.calls for s in sessions) / calls,
                              "min_ms": min(s.min_ms for s in sessions),
                              "max_ms": max(s.max_ms for s in sessions),
                              "p25_ms": min(min(s.p25_ms for s in sessions), median),
                              "p75_ms": max(max(s.p75_ms for s in sessions), median)})

    @property
    def session_deviation(self) -> float:
        """The largest distance of a session's median from the median of them, relative."""
        if not self.sessions_ms or len(self.sessions_ms) < 2:
            return math.inf
        middle = statistics.median(self.sessions_ms)
        return max(abs(m - middle) for m in self.sessions_ms) / middle


def consistency_problem(session: Session) -> str | None:
    """Why a session's own numbers cannot be true, or None when they are plausible.

    Every call takes positive time; the worker's time for a call cannot exceed the judge's time
    for the step around it; device time inside a call cannot exceed the host time around it less
    the window the device waited before it.
    """
    if not session.host_ms:
        return "no timed calls were reported"
    if any(not (t > 0) for t in session.host_ms + session.device_ms):
        return "a timed call reported a non-positive duration"
    for host, go in zip(session.host_ms, session.go_ms):
        if host > go + 0.02:
            return f"a call reported {host:.3f} ms inside a step the judge measured at {go:.3f} ms"
    windows = session.window_ms or [0.0] * len(session.device_ms)
    for host, device, window in zip(session.host_ms, session.device_ms, windows):
        if device + window > host * 1.05 + 0.05:
            return (f"a call reported {device:.3f} ms on the device after a wait of {window:.3f} ms, but "
                    f"{host:.3f} ms on the host")
    return None


def _excess(candidate: list[float], reference: list[float], floor_ms: float, factor: float,
            allowance: float) -> tuple[float, float] | None:
    """(the candidate's extra overhead, its bound) when a step costs the candidate more than it
    costs the reference by more than noise allows, else None.

    The two sessions were interleaved call by call, so the candidate's i-th call and the
    reference's i-th call saw the same machine: the median of their differences cancels load that
    hits both, while work hidden in a step lengthens that step in every candidate call. Allowed:
    ``factor - 1`` times the reference's typical overhead (``floor_ms``, the quietest attempt's),
    a fixed ``allowance``, and twice the standard error of the median difference.
    """
    n = min(len(candidate), len(reference))
    if n == 0:
        return None
    diffs = [c - r for c, r in zip(candidate[:n], reference[:n])]
    extra = statistics.median(diffs)
    spread = (statistics.quantiles(diffs, n=4, method="inclusive")[2]
              - statistics.quantiles(diffs, n=4, method="inclusive")[0]) if n > 1 else 0.0
    bound = (factor - 1) * floor_ms + allowance + 2 * 1.25 * (spread / 1.349) / math.sqrt(n)
    return (extra, bound) if extra > bound else None


def integrity_problem(candidate: Session, reference: Session | list[Session], backend: str = "cuda") -> str | None:
    """Why the candidate's session cannot be believed, judged against the reference's session.

    A call reported shorter than it was leaves unexplained time in the go step (the channel) or
    in the worker's own host clock (the gap); work moved out of the call into the untimed
    prepare step makes that step longer. Either, beyond what the reference shows for the same
    steps in the same moments plus noise (``_excess``), fails the timing. ``reference`` is the
    calibration timed beside this candidate session, last in a list of every attempt's; the
    quietest attempt sets the reference's typical overhead, so timing again never loosens it.
    """
    references = reference if isinstance(reference, list) else [reference]
    beside = references[-1]
    cpu = backend == "cpu"
    channel_factor, prepare_factor = ((CPU_CHANNEL_FACTOR, CPU_PREPARE_FACTOR) if cpu
                                      else (CHANNEL_FACTOR, PREPARE_FACTOR))
    relative = CPU_UNTIMED_FRACTION * statistics.median(candidate.figure_ms) if cpu and candidate.figure_ms else 0.0

    def quietest(values: list[list[float]]) -> float:
        return min((statistics.median(v) for v in values if v), default=0.0)

    found = _excess(candidate.channel_ms, beside.channel_ms, quietest([r.channel_ms for r in references if r.go_ms]),
                    channel_factor, CHANNEL_ALLOWANCE_MS + relative)
    if found:
        return (f"each call took {found[0]:.3f} ms longer than the candidate's own clock says, more than the "
                f"reference beside it (at most {found[1]:.3f} ms more)")
    found = _excess(candidate.gap_ms, beside.gap_ms, quietest([r.gap_ms for r in references]),
                    GAP_FACTOR, GAP_ALLOWANCE_MS)
    if found:
        return (f"each call's host clock ran {found[0]:.3f} ms further beyond its device time and host path than "
                f"the reference's beside it (at most {found[1]:.3f} ms): work ran outside the timed events")
    found = _excess(candidate.prepare_ms, beside.prepare_ms, quietest([r.prepare_ms for r in references]),
                    prepare_factor, PREPARE_ALLOWANCE_MS + relative)
    if found:
        return (f"preparing each call took {found[0]:.3f} ms longer than the reference's beside it, for the same "
                f"inputs (at most {found[1]:.3f} ms): work is being done outside the timed calls")
    return background_problem(candidate)


def background_problem(candidate: Session) -> str | None:
    """Why the candidate's own CPU use between its steps shows work outside the timed calls, or
    None. Its process's CPU clock counts only what its threads ran, so load cannot excuse it."""
    background = candidate.background_cpu_mean_ms
    if background is not None and candidate.figure_ms:
        bound = BACKGROUND_CPU_ALLOWANCE_MS + BACKGROUND_CPU_FRACTION * statistics.median(candidate.figure_ms)
        if background > bound:
            return (f"the candidate's process used {background:.3f} ms of CPU per call while it was not being timed "
                    f"(at most {bound:.3f} ms): a thread of its own is working outside the timed calls")
    return None


# What a step that waited for a CPU may lose, as a multiple of the waiting the kernel counted: the
# wait itself, and as much again besides (it then runs on a cold core and is read by a judge that
# may have waited too): an honest step was measured 1.6 ms longer than its 4.0 ms of waiting.
WAIT_COST = 2.0
# The share of a timed session the machine may be stalled for a CPU or for memory (pressure-stall
# information) before the judge cannot tell a longer step from load at all: a judge alone on a
# 2-core machine stalls it 8-15% of its timing, its own processes contending; with a parallel test
# run beside it, 67-100%.
CONTENDED_PRESSURE = 0.5


def load_excuse(problem: str, candidate: Session, references: list[Session], backend: str = "cuda",
                pressure: float | None = None) -> str | None:
    """Why ``problem`` (from ``integrity_problem``) may be the machine's load and not hidden work,
    or None when it cannot be.

    A refusal says the candidate hid work; the judge makes it only where it could have told. On
    a machine with more runnable processes than cores, a process that has used more CPU than
    another is the one the scheduler makes wait, so load can lengthen the candidate's steps more
    than the reference's beside them, every call alike, which pairing the calls does not cancel;
    a step that waited is then run on a cold core, which no count shows; and the judge timing a
    step may itself wait for a CPU when the reply comes, seeing the step end late. So a failure
    is excused where the steps pass with ``WAIT_COST`` times each side's counted waiting (its
    worker's and the judge's, ``process_tree.RunqueueWait``) taken out, or where the machine
    stalled (``pressure``, ``process_tree.stalled_fraction``) ``CONTENDED_PRESSURE`` of the time.
    That only excuses the candidate from the refusal: no speedup is paid on such a timing, so a
    candidate that makes itself wait, or loads the machine, gains nothing by it.
    """
    if background_problem(candidate):
        return None
    if pressure is not None and pressure >= CONTENDED_PRESSURE:
        because = f"the machine stalled for a CPU or memory {pressure:.0%} of the time it was timed"
    else:
        less = candidate.less_waiting(WAIT_COST)
        others = [r.less_waiting(WAIT_COST) for r in references]
        if (less is None or not less.go_ms or any(r is None or not r.go_ms for r in others)
                or integrity_problem(less, others, backend) is not None):
            return None
        because = (f"its calls waited {candidate.wait_median_ms:.3f} ms each for a CPU (the reference's "
                   f"{references[-1].wait_median_ms:.3f} ms)")
        if candidate.judge_wait_median_ms is not None:
            because += (f", and the judge timing them {candidate.judge_wait_median_ms:.3f} ms (beside the "
                        f"reference's {references[-1].judge_wait_median_ms or 0.0:.3f} ms)")
    return (f"{problem}; but {because}: the machine is too loaded to tell work hidden outside the timed calls "
            "from waiting")


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def stability_problem(stats: TimingStats, max_uncertainty: float) -> str | None:
    """Why a session's median cannot be believed to the precision the reward needs, or None."""
    if stats.precision is None:
        return f"{stats.calls} timed calls are too few to know the median"
    if stats.precision > max_uncertainty:
        return (f"the median is known only to ±{stats.precision:.1%} after {stats.calls} calls "
                f"(IQR {stats.spread:.1%} of the median; needed ±{max_uncertainty:.1%}): the machine is too "
                "noisy to time this reliably")
    return None


# How far the reference's calibration time may move from its settled eager baseline (the same
# model, timed the same way) before the machine is not in the state the baseline was taken in.
DRIFT_TOLERANCE = {"cuda": 0.10, "cpu": 0.35}


# Which backend default stands for each TimingConfig field left unset (None).
BACKEND_DEFAULTS = {"precision": PRECISION, "max_uncertainty": MAX_UNCERTAINTY, "drift_tolerance": DRIFT_TOLERANCE,
                    "baseline_sessions": BASELINE_SESSIONS, "baseline_tolerance": BASELINE_TOLERANCE}


def for_backend(config: "TimingConfig", backend: str) -> "TimingConfig":
    """``config`` with every unset field given the backend's default."""
    return replace(config, **{name: defaults[backend] for name, defaults in BACKEND_DEFAULTS.items()
                              if not getattr(config, name)})


# Beyond this (and beyond this many times the reference's own call), the judge's view of a
# trusted call's end is too late to bound work hidden outside a candidate's: the channel check
# allows a multiple of it. Quiet machines show 0.05 ms (cuda) to 1 ms (a 2-core virtual machine);
# a large output's copy is part of it, and takes about as long as writing that output in the call.
LOADED_CHANNEL_MS, LOADED_CHANNEL_FACTOR = 5.0, 2.0


def resolution_problem(references: list[Session]) -> str | None:
    """Why the judge cannot see hidden time finely enough to pay a speedup, or None.

    The channel check (``integrity_problem``) lets a candidate's go step exceed the reference's
    by a multiple of the reference's channel, the quietest attempt's. On a machine loaded enough
    that even that is long, the allowance would admit more hidden time than a small task's
    whole call: the timing is then not believed, whatever the candidate's own clock says.
    """
    timed = [r for r in references if r.go_ms]
    if not timed:
        return None
    quietest = min(timed, key=lambda r: statistics.median(r.channel_ms))
    channel = statistics.median(quietest.channel_ms)
    limit = max(LOADED_CHANNEL_MS, LOADED_CHANNEL_FACTOR * statistics.median(quietest.figure_ms))
    if channel <= limit:
        return None
    return (f"the judge saw the trusted reference's calls answer {channel:.1f} ms after they ended (the quietest of "
            f"{len(timed)} attempt(s); at most {limit:.1f} ms): the machine is too loaded to tell work hidden "
            "outside the timed calls from waiting")


def drift_problem(calibration: TimingStats, eager: TimingStats | None, tolerance: float) -> str | None:
    """Why the candidate's session ran on a machine unlike the one its baseline was timed on.

    The trusted reference, timed interleaved with the candidate, should take what its settled
    eager baseline took; if it does not, something else was using the device (or its clocks
    changed), and a speedup against that baseline would measure the machine, not the kernel.
    """
    if eager is None or not eager.median_ms:
        return None
    ratio = calibration.median_ms / eager.median_ms
    if 1 / (1 + tolerance) <= ratio <= 1 + tolerance:
        return None
    return (f"the reference took {ratio:.2f}x its eager baseline while the candidate was timed: the machine "
            "was not in the state the baseline was measured in")
