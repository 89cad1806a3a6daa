"""Judge runs shared by many concurrent episodes.

Each judge run already starts fresh worker processes of its own; what a pool adds is a bound on
how many run at once (compilation and verification use CPU cores and memory) and an ``async``
face for the agent's event loop. The local pool runs every judge in a process of its own rather
than a thread of the agent's: the judge keeps its own clock while it times a candidate, and a
busy event loop (or another judge) sharing its interpreter would stretch that clock and fail
honest kernels on timing integrity. Timing is serialised per device by the judge itself (a file
lock), so a pool never lets two candidates be timed on one GPU at the same time.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..device import resolve_backend
from ..judge import fork_server
from ..judge.config import JudgeConfig
from ..judge.pools import stops_overdue_runs
from ..judge.reference import ReferenceReport
from ..judge.sandbox import ProcessKind
from ..judge.verdict import Verdict
from ..solution import Solution
from ..task import Task


def default_concurrency() -> int:
    """Judge runs at once on this machine: one per two cores, at least two."""
    return max(2, (os.cpu_count() or 2) // 2)


def settle_pool(pool: Any, config: JudgeConfig | None, max_concurrent: int | None) -> None:
    """What a process pool of judges fixes first: ``backend``, ``config``, ``cache_dir`` (made)
    and ``max_concurrent``."""
    config = config or JudgeConfig()
    pool.backend = resolve_backend(config.backend)
    pool.max_concurrent = max_concurrent or default_concurrency()
    # Every pool process judges on the same backend, and its workers' memory caps are sized for
    # the judges that share the machine with it.
    pool.config = replace(config, backend=pool.backend,
                          judges_at_once=max(config.judges_at_once, pool.max_concurrent))
    pool.cache_dir = Path(pool.config.cache_dir)
    pool.cache_dir.mkdir(parents=True, exist_ok=True)


MESSAGES_WAIT_S = 5.0  # how long a run's result waits for the last of its progress messages

_judge: Any = None  # the Judge of a pool process
_messages: Any = None  # where a pool process sends its judges' progress messages (LocalJudgePool)


def _start_judge(config: JudgeConfig, processes: int, messages: Any = None) -> None:
    global _judge, _messages
    import torch

    from ..judge.judge import Judge

    # The judge compares outputs with torch on the CPU; a full-size thread pool in every pool
    # process would oversubscribe the cores that the candidates' own processes need.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))
    _judge = Judge(config)
    _messages = messages
    if config.fork_workers:
        # This process will start workers: its fork server imports torch meanwhile.
        fork_server.start_soon(_judge.python, _judge.worker_env(ProcessKind.REFERENCE))


def _warm() -> None:
    """What this pool process's first judge would wait on, made ready: the bindings' precompiled
    header and the judge's binding object, the op counter (each shared by every process: the
    first candidates of a run waited 8 s on the counter's build), and the process's fork server
    (once ready, a worker starts in milliseconds)."""
    try:
        _judge.builder.prepare()
    except Exception:  # noqa: BLE001 - no toolchain here: every build's verdict says why
        pass
    _judge.op_counter()  # never raises: a counter that does not build is said in each verdict
    if _judge.config.fork_workers:
        fork_server.server_for(_judge.python, _judge.worker_env(ProcessKind.REFERENCE))


def _exit_on_term(*_: Any) -> None:
    # SystemExit unwinds the judge's context managers, which kill its worker process groups. A
    # second SIGTERM (a supervisor repeating itself) must not interrupt that unwinding, nor the
    # exit handlers after it (the fork servers' directories are removed there).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(1)


PR_SET_PDEATHSIG = 1


def start_hosted_judge(config: JudgeConfig, processes: int, watch_parent: bool = False) -> None:
    """``_start_judge`` for a pool process that a supervisor may stop: SIGTERM unwinds the judge
    (its workers are killed, not orphaned). With ``watch_parent``, so does the supervisor's death,
    which the kernel turns into a SIGTERM here (the parent-death signal follows the thread that
    started this process: use it where that thread lives as long as its process, a Ray actor's)."""
    signal.signal(signal.SIGTERM, _exit_on_term)
    if watch_parent:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() == 1:  # the supervisor died before the line above: nobody will collect us
            sys.exit(1)
    _start_judge(config, processes)


def _relayed(tag: int | None, method: str, *args: Any) -> Any:
    """Run the judge's ``method``, its progress messages sent to the pool's listener ``tag`` (if
    any), then None: the mark, behind every message in the same queue, that the run has ended."""
    if tag is None or _messages is None:
        _judge.progress = lambda message: None
        return getattr(_judge, method)(*args)
    _judge.progress = lambda message: _messages.put((tag, message))
    try:
        return getattr(_judge, method)(*args)
    finally:
        _messages.put((tag, None))


def _evaluate(task: Task, solution: Solution, stage: str, tag: int | None = None) -> Verdict:
    return _relayed(tag, "evaluate", task, solution, stage)


def _evaluate_many(task: Task, solutions: list[Solution], stage: str, tag: int | None = None) -> list[Verdict]:
    return _relayed(tag, "evaluate_many", task, solutions, stage)


def group_timeout(timeout_s: float | None, candidates: int) -> float | None:
    """A group run's time limit from one judge's: its candidates are checked together and
    profiled one at a time (``judge.group``), so it may take as long as that many judges."""
    return None if timeout_s is None else timeout_s * max(1, candidates)


def split_group(items: list, ways: int) -> list[list]:
    """``items`` (a group's candidates) in at most ``ways`` group runs of sizes that differ by one
    at most, in order: a large group spread over a pool's judges."""
    ways = max(1, min(ways, len(items)))
    size, extra = divmod(len(items), ways)
    parts, start = [], 0
    for k in range(ways):
        end = start + size + (k < extra)
        parts.append(items[start:end])
        start = end
    return [p for p in parts if p]


def _check_reference(task: Task, tag: int | None = None) -> ReferenceReport:
    return _relayed(tag, "check_reference", task)


class LocalJudgePool:
    """Judge evaluations in ``max_concurrent`` processes of this machine, one run per process at a time.

    A run may take a ``progress`` callback, as the judge itself does: the pool processes send
    the judge's messages back through a queue, and a thread here hands each to its run's callback.
    """

    relays_progress = True

    def __init__(self, config: JudgeConfig | None = None, max_concurrent: int | None = None):
        settle_pool(self, config, max_concurrent)
        self._lock = threading.Lock()
        context = multiprocessing.get_context("spawn")
        self._messages = context.Queue()  # given to each pool process as it starts
        self._listeners: dict[int, tuple[Callable[[str], None], threading.Event]] = {}
        self._next_tag = 0
        self._reader = threading.Thread(target=self._deliver, daemon=True, name="judge-pool-progress")
        self._reader.start()
        self._executor = self._new_executor()
        self._closed = False

    def _new_executor(self) -> ProcessPoolExecutor:
        # spawn, not fork: the agent's process has threads and an event loop that a fork would copy.
        return ProcessPoolExecutor(self.max_concurrent, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_judge,
                                   initargs=(self.config, self.max_concurrent, self._messages))

    def _deliver(self) -> None:
        while (item := self._messages.get()) is not None:
            tag, message = item
            listener, ended = self._listeners.get(tag, (None, None))
            if listener is None:
                continue
            if message is None:
                ended.set()
                continue
            try:
                listener(message)
            except Exception:  # a display's failure must not stop the messages of other runs
                pass

    async def _with_progress(self, fn: Callable[..., Any], progress: Callable[[str], None] | None,
                             *args: Any) -> Any:
        if progress is None:
            return await self._submit(fn, *args)
        with self._lock:
            tag, self._next_tag = self._next_tag, self._next_tag + 1
        ended = threading.Event()
        self._listeners[tag] = (progress, ended)
        try:
            result = await self._submit(fn, *args, tag)
            # The result comes back by another way than the messages: let the last of them in first
            # (bounded: a pool process that died sends no mark).
            await asyncio.to_thread(ended.wait, MESSAGES_WAIT_S)
            return result
        finally:
            self._listeners.pop(tag, None)

    async def evaluate(self, task: Task, solution: Solution, stage: str,
                       progress: Callable[[str], None] | None = None) -> Verdict:
        return await self._with_progress(_evaluate, progress, task, solution, stage)

    async def evaluate_many(self, task: Task, solutions: list[Solution], stage: str,
                            progress: Callable[[str], None] | None = None) -> list[Verdict]:
        return await self._with_progress(_evaluate_many, progress, task, solutions, stage)

    async def check_reference(self, task: Task, progress: Callable[[str], None] | None = None) -> ReferenceReport:
        return await self._with_progress(_check_reference, progress, task)

    def warm(self) -> None:
        """Start every pool process, its workers' fork server and the bindings' precompiled
        header, and wait until they are ready: what a long run pays once, before its first
        judge, rather than in its first judges' times (a benchmark's steady state)."""
        # Submitted together, each call finds no idle process and starts one of its own.
        for future in [self._executor.submit(_warm) for _ in range(self.max_concurrent)]:
            future.result()

    async def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise RuntimeError("the judge pool is closed")
        loop = asyncio.get_running_loop()
        executor = self._executor
        try:
            return await loop.run_in_executor(executor, fn, *args)
        except BrokenProcessPool:
            # A pool process died (killed, out of memory): the judge itself never raises for a
            # bad candidate. Start a new pool and run this evaluation once more.
            with self._lock:
                if self._executor is executor:
                    self._executor = self._new_executor()
                executor = self._executor
            return await loop.run_in_executor(executor, fn, *args)

    def close(self) -> None:
        self._closed = True
        try:
            self._executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self._messages.put(None)
            self._reader.join(timeout=5)

    def __enter__(self) -> "LocalJudgePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SpreadJudgePool:
    """Several pools as one (one per GPU): each run goes to the pool with the fewest runs in
    flight, so the agent's episodes use every GPU. The pools stay their owner's to close, unless
    ``owns_pools``: then closing this closes them."""

    def __init__(self, pools: list[Any], owns_pools: bool = False) -> None:
        if not pools:
            raise ValueError("SpreadJudgePool needs at least one pool")
        self.pools = list(pools)
        self.owns_pools = owns_pools
        self.backend = self.pools[0].backend
        self.cache_dir = self.pools[0].cache_dir
        self.in_flight = [0] * len(self.pools)
        self.relays_progress = all(getattr(p, "relays_progress", False) for p in self.pools)
        self.stops_overdue_runs = all(stops_overdue_runs(p) for p in self.pools)

    async def _on_least_busy(self, method: str, *args: Any, **kwargs: Any) -> Any:
        index = min(range(len(self.pools)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        try:
            return await getattr(self.pools[index], method)(*args, **kwargs)
        finally:
            self.in_flight[index] -= 1

    async def evaluate(self, task: Task, solution: Solution, stage: str, **kwargs: Any) -> Verdict:
        return await self._on_least_busy("evaluate", task, solution, stage, **kwargs)

    async def evaluate_many(self, task: Task, solutions: list[Solution], stage: str, **kwargs: Any) -> list[Verdict]:
        return await self._on_least_busy("evaluate_many", task, solutions, stage, **kwargs)

    async def check_reference(self, task: Task, **kwargs: Any) -> ReferenceReport:
        return await self._on_least_busy("check_reference", task, **kwargs)

    def close(self) -> None:
        if self.owns_pools:
            for pool in self.pools:
                pool.close()

    def __enter__(self) -> "SpreadJudgePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
