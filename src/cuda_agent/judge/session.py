"""The judge's side of a timing session: one worker's calls, driven one step at a time.

For every call the judge draws a fresh seed, sends ``prepare`` (the worker builds that call's
inputs and flushes the cache) and then ``go`` (the timed call), timing both steps on its own
clock. Seeds are sent only when their call is due, so nothing can be computed ahead. The first
calls are warm-up (torch.compile compiles there); their host path sets the session's window
(``timing.window_for``). Timed calls go on until the median is known to the precision wanted, or
the call budget or time budget is spent.

Several sessions can be interleaved call by call (``interleave``): the candidate's and the
reference's calibration calls then see the same state of the machine. Each worker's call is
followed at once by its own next ``prepare``, so work a call leaves running shows in that
worker's next step rather than hiding behind another worker's. A session that ``follows``
another ends with it, so both make the same number of calls under the same conditions; and while
one worker waits for its turn it sleeps rather than polls (``linger_s`` 0 after its prepare), so
that on a machine with few cores neither steals the other's. Every call of an interleaved session
thus starts in a worker woken by its ``go``, the candidate's and the reference's alike, so the
wake-up counts the same in both sides' go steps (their ``channel``, compared in
``timing.integrity_problem``). The judge, in turn, polls for a call's reply about as long as the
session's previous call took (``go_spin_s``): a judge that slept through a long call and woke
late would add its own wake-up to that call's channel and not to a shorter one's.

A session with a ``flusher`` (cpu backend) splits the cache flush: its worker's ``prepare``
flushes only the caches below the shared last level, and the trusted flusher, a process sharing
that level, flushes it in a ``flush`` step right before each ``go``. The call starts as cold as
before, but the untrusted worker's prepare step is no longer dominated by a flush of a large last
level (960 MB read on a 480 MB L3): the check of that step against the reference's
(``timing.integrity_problem``) then sees work moved into it, and the flush's cost, which depends
on the dirty lines the call before left, falls on a process whose time is not compared.

For every call the judge also reads how long the worker's stepping thread, and its own thread,
waited for a CPU in each step (the kernel's count, ``process_tree.RunqueueWait``): on a loaded
machine the scheduler can make one side wait more than the other, call after call, or keep the
judge off a CPU when a reply comes, and the judge then cannot tell that from hidden work
(``timing.load_excuse``).

A session with a ``cpu_clock`` (the worker's process CPU clock, cpu backend) also records, for
each timed call, the CPU time the worker used between the end of its prepare step and its go,
while its timing thread waits: work other threads did while it was not being timed
(``timing.integrity_problem``).

A session with a ``sampler`` (cpu backend, the candidate) has the kernel sample where its
worker's CPU time goes (``cpu_samples``). A sample costs the sampled thread time, so the record
is on only in sampled calls: in every ``SAMPLED_EVERY`` calls after the warm-up, one chosen at
random (secretly, as seeds are) is made exactly as a timed call is (the same messages, its output
kept and rechecked alike) with the record on, and its time is not used. Its go step, on the
judge's clock, is a window of the record. The worker cannot tell which calls are sampled without
spending time in every call to find out.

A session with a ``stager`` builds none of its inputs: its worker's prepare step gets no seed
and only flushes; then the stager, a trusted process of its own, writes that call's inputs into
the input arena they all map and flushes the cache (``stage``), and the go follows
(``input_arena``). Its prepare step then knows nothing of the call's inputs; it is still held to
the reference's, since work a call leaves running past its reply lands there. The reference's
calibration calls are staged the same way by the same stager, so both sides' steps do the same
work and both follow another process's use of the device (on a GPU, a context switch).
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from .cpu_samples import now_ns
from .process_tree import RunqueueWait
from .timing import Session, median_interval, window_for

if TYPE_CHECKING:
    from .cpu_samples import ProcessSampler
    from .worker_process import WorkerProcess

# Exchanges with a worker: (worker, cmd or None for a timing step, timeout, fields, expect,
# spin_s=how long to poll for the reply before sleeping, None for the default).
Exchange = Callable[..., dict]

# The judge polls for a timing step's reply this long before sleeping; for a call's reply, also
# this many times as long as the session's previous call took, up to a limit (a longer call pays
# one wake-up in its channel, small beside it).
STEP_SPIN_S = 0.05
GO_SPIN_FACTOR, GO_SPIN_MAX_S = 1.5, 1.0
# With a sampler: one call in every this many after the warm-up is sampled and not timed.
SAMPLED_EVERY = 3


def go_spin_s(previous_go_s: float | None) -> float:
    """How long the judge polls for a call's reply, given the session's previous call."""
    return max(STEP_SPIN_S, min(GO_SPIN_MAX_S, GO_SPIN_FACTOR * (previous_go_s or 0.0)))


class TimedSession:
    """One worker's session; ``step()`` makes one call (warm-up or timed) until it is done."""

    def __init__(self, worker: "WorkerProcess", label: str, *, keep: bool, warmup: int, min_calls: int,
                 max_calls: int, precision: float, target_seconds: float, window: bool,
                 exchange: Exchange, post: Callable[["WorkerProcess", dict], None], seed: Callable[[], int],
                 call_timeout_s: float, warm_timeout_s: float, cores: list[int],
                 follows: "TimedSession | None" = None, flusher: "WorkerProcess | None" = None,
                 cpu_clock: Callable[[], float | None] | None = None,
                 stager: "WorkerProcess | None" = None, arena: dict | None = None,
                 sampler: "ProcessSampler | None" = None, overtime_calls: int = 0):
        self.worker, self.label, self.keep = worker, label, keep
        self.warmup, self.min_calls, self.max_calls = warmup, min_calls, max_calls
        # A baseline's session (it keeps no outputs) may go on past max_calls, up to this many,
        # while its median is less precise than ``precision`` and ``target_seconds`` of wall time
        # have not passed since it began: a fast reference with a few percent of jitter per call
        # settles by timing longer, where a slow one's calls (a CPU's cache flush each) stop it.
        self.overtime_calls = overtime_calls
        self._began = time.perf_counter()
        self.precision, self.target_seconds, self.use_window = precision, target_seconds, window
        self._exchange, self._post, self._seed = exchange, post, seed
        self.call_timeout_s, self.warm_timeout_s, self.cores = call_timeout_s, warm_timeout_s, cores
        self.follows, self.flusher, self.cpu_clock = follows, flusher, cpu_clock
        self.stager, self.arena, self.sampler = stager, arena, sampler
        self.linger_s: float | None = None  # None: the worker's own default; set by interleave
        self.session = Session()
        self.seeds: list[int] = []
        self.window_ms = 0.0
        self._warm_calls: list[float] = []
        self._i = 0                        # calls made so far, warm-up included
        # The prepared call: seed, prepare ms, CPU s, ms the worker and the judge waited for a CPU
        # in the prepare step.
        self._next: tuple[int, float, float | None, tuple[float, float | None] | None] | None = None
        self._wait: RunqueueWait | None = None
        self._judge_wait: RunqueueWait | None = None
        self._last_go_s: float | None = None     # the judge's clock on the previous call's go step
        self.done = False
        self.ops: dict | None = None              # the session's ops, from the worker's counter
        self.sampled_calls = 0
        self._sampling_plan: list[bool] = []      # which of the coming calls are sampled
        self.counter_watching: bool | None = None

    def begin(self) -> None:
        # The worker's stepping thread, and the judge's thread that steps it (this one). The
        # judge's waiting may overlap the call rather than its reply; counting it can only excuse
        # a refusal (a timing that then claims no speedup), never pay one.
        self._wait = RunqueueWait(f"/proc/{self.worker.pid}/schedstat")
        self._judge_wait = RunqueueWait(f"/proc/self/task/{threading.get_native_id()}/schedstat")
        self._began = time.perf_counter()
        message = {"cmd": "time", "max_calls": max(self.max_calls, self.overtime_calls), "cores": self.cores,
                   "keep": self.keep}
        if self.stager is not None:
            message["arena"] = self.arena
        self._post(self.worker, message)

    def step(self) -> None:
        """One call: go on the prepared inputs, then prepare the next call at once, so that any
        work a call leaves behind lands in this worker's own next step on the judge's clock,
        never in another session's. Marks the session done when it has enough."""
        if self.follows is not None and self.follows.done:
            self.done = True
        if not self.done and self._next is None:
            self._prepare()
        if self.done:
            return
        timed = self._i >= self.warmup
        seed, prepare_ms, cpu_before, prepare_wait_ms = self._next
        self._next = None
        if self.stager is not None:
            # This call's inputs, now that the worker has answered its prepare step; the stager
            # flushes the cache behind them.
            self._exchange(self.stager, "stage", self._limit(timed), {"seed": seed}, expect={"ok": bool})
        elif self.flusher is not None:
            # It sleeps after the flush, for its own call as for another worker's: each call then
            # starts in a worker woken by its go (see the module's docstring).
            self._exchange(self.flusher, None, self._limit(timed), {"step": "flush", "linger_s": 0.0},
                           expect={"ok": bool})
        background_ms = None
        if cpu_before is not None and (cpu_after := self._cpu()) is not None:
            background_ms = (cpu_after - cpu_before) * 1e3
        waited_before = self._waited()
        sampled = timed and self._sampled()
        if sampled:
            self.sampler.enable()
        started_ns = now_ns()
        t1 = time.perf_counter()
        reply = self._exchange(self.worker, None, self._limit(timed),
                               {"step": "go", "keep": self.keep and timed, "window_ms": self.window_ms},
                               expect={"host_ms": float, "call_ms": float, "device_ms": (float, type(None)),
                                       "window_ms": (float, type(None)), "threads": int},
                               spin_s=go_spin_s(self._last_go_s))
        t2 = time.perf_counter()
        if sampled:
            self.sampler.disable()
            self.sampler.watch(started_ns, now_ns())
            self.sampler.read()
        go_wait_ms = _difference(waited_before, self._waited())
        self._last_go_s = t2 - t1
        self._i += 1
        if sampled:
            self._record_sampled(seed, reply)
        elif timed:
            self._record(seed, prepare_ms, (t2 - t1) * 1e3, reply, background_ms, (prepare_wait_ms, go_wait_ms))
        else:
            self._warm_calls.append(reply["call_ms"])
        if not self.done:
            self._prepare()

    def _sampled(self) -> bool:
        """Whether the coming call is a sampled one: one at random in each run of SAMPLED_EVERY."""
        if self.sampler is None:
            return False
        if not self._sampling_plan:
            chosen = secrets.randbelow(SAMPLED_EVERY)
            self._sampling_plan = [i == chosen for i in range(SAMPLED_EVERY)]
        return self._sampling_plan.pop()

    def _record_sampled(self, seed: int, reply: dict) -> None:
        """A sampled call: its output is kept and checked as a timed call's, its time not used."""
        self.session.threads_grown += reply["threads"] > 0
        self.seeds.append(seed)
        self.sampled_calls += 1
        if self._out_of_calls():
            self.done = True

    def _out_of_calls(self) -> bool:
        """Whether the session has made every call it may: ``max_calls``, or its overtime's
        (``overtime_calls``) once its wall time is spent. Precision ends a session in overtime as
        it ends any other."""
        calls = len(self.seeds)
        if calls < self.max_calls:
            return False
        return calls >= self.overtime_calls or time.perf_counter() - self._began >= self.target_seconds

    def _limit(self, timed: bool) -> float:
        # Early calls may compile (torch.compile, lazy module loading): the long limit.
        return self.call_timeout_s if timed else self.warm_timeout_s

    def _prepare(self) -> None:
        """The next call's inputs and cache flush, timed on the judge's clock."""
        timed = self._i >= self.warmup
        if timed and not self.window_ms and self.use_window:
            self.window_ms = window_for(self._warm_calls)
        seed = self._seed()
        fields = {"step": "prepare", "linger_s": self.linger_s}
        fields.update({"staged": True} if self.stager is not None else {"seed": seed})
        if self.flusher is not None:
            fields["flush"] = "private"
        waited_before = self._waited()
        t0 = time.perf_counter()
        ready = self._exchange(self.worker, None, self._limit(timed), fields, expect={"full": bool})
        if ready["full"] and timed and self.keep:
            self.done = True  # no room left to keep this call's output for checking
            return
        prepare_ms = (time.perf_counter() - t0) * 1e3
        prepare_wait_ms = _difference(waited_before, self._waited())
        self._next = (seed, prepare_ms, self._cpu(), prepare_wait_ms)

    def _waited(self) -> tuple[float, float | None] | None:
        """ms the worker's stepping thread and the judge's own thread have waited for a CPU while
        ready to run, so far (None where the kernel does not count the worker's; the judge's
        None where it does not count that)."""
        worker = self._wait.read() if self._wait is not None else None
        judge = self._judge_wait.read() if self._judge_wait is not None else None
        return None if worker is None else (worker, judge)

    def _cpu(self) -> float | None:
        return self.cpu_clock() if self.cpu_clock is not None else None

    def _record(self, seed: int, prepare_ms: float, go_ms: float, reply: dict, background_ms: float | None,
                waits: tuple[tuple[float, float | None] | None, tuple[float, float | None] | None]) -> None:
        s = self.session
        if background_ms is not None:
            s.background_cpu_ms.append(background_ms)
        if None not in waits:
            (worker_prepare, judge_prepare), (worker_go, judge_go) = waits
            s.prepare_wait_ms.append(worker_prepare)
            s.go_wait_ms.append(worker_go)
            if judge_prepare is not None and judge_go is not None:
                s.judge_prepare_wait_ms.append(judge_prepare)
                s.judge_go_wait_ms.append(judge_go)
        s.threads_grown += reply["threads"] > 0
        self.seeds.append(seed)
        s.host_ms.append(reply["host_ms"])
        s.call_ms.append(reply["call_ms"])
        if reply["device_ms"] is not None:
            s.device_ms.append(reply["device_ms"])
            s.window_ms.append(reply["window_ms"] if reply["window_ms"] is not None else 0.0)
        s.prepare_ms.append(prepare_ms)
        s.go_ms.append(go_ms)
        if self._out_of_calls():  # kept outputs, the sampled calls' too
            self.done = True
        elif len(s.call_ms) >= self.min_calls and self.follows is None:
            measured_s = sum(s.host_ms) / 1e3
            self.done = median_interval(s.figure_ms) <= self.precision or measured_s >= self.target_seconds

    def finish(self) -> int:
        """End the session; the number of outputs the worker says it kept. The worker's count of
        the ops its calls dispatched, if it keeps one, is left in ``ops``."""
        reply = self._exchange(self.worker, None, self.call_timeout_s, {"step": "stop"}, expect={"calls": int})
        if self.sampler is not None:
            self.sampler.read()
            self.sampler.close()
        for wait in (self._wait, self._judge_wait):
            if wait is not None:
                wait.close()
        self.ops = reply.get("ops")
        self.counter_watching = reply.get("counter_watching")
        return reply["calls"]


def _difference(before: tuple[float, float | None] | None,
                after: tuple[float, float | None] | None) -> tuple[float, float | None] | None:
    """What the worker's and the judge's counts advanced by: None where the worker's is missing,
    the judge's None where its own is."""
    if before is None or after is None:
        return None
    judge = after[1] - before[1] if after[1] is not None and before[1] is not None else None
    return after[0] - before[0], judge


def interleave(sessions: list[TimedSession], deadline_s: float, on_timeout: Callable[[TimedSession], Any]) -> None:
    """Run sessions call by call in turn until every one is done."""
    started = time.perf_counter()
    for s in sessions:
        if len(sessions) > 1:
            s.linger_s = 0.0  # after its prepare, its next step comes only after the others'
        s.begin()
    while not all(s.done for s in sessions):
        for s in sessions:
            s.step()
        if time.perf_counter() - started > deadline_s:
            on_timeout(next(s for s in sessions if not s.done))
            return

