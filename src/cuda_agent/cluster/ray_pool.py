"""The judge's worker pool on a Ray cluster: one actor per GPU slot (or per CPU slot on the CPU
backend), placed by Ray's resources, behind the same interface as the local pool.

Each actor is only a supervisor. The judge itself runs in a local process that the actor starts
(pebble, spawned), exactly as in the local pools, and the candidates run in the judge's own
sandboxed workers below it. So the trust boundary stays the judge's: a candidate is never a Ray
worker, it gets none of Ray's environment, the Ray session directory is hidden from it like the
judge's cache, and as root it runs as another user who cannot connect to Ray's sockets. Only the
judge's inputs (task, solution) and its verdicts travel through Ray.

Faults: a job whose actor dies (killed, its node lost) is judged again on another actor, and its
caller gets one verdict; Ray restarts the actor, which rejoins the pool once it answers. A job
that outlives its time limit stops the judge process (the actor stays). Backpressure: at most
``max_pending`` jobs are taken at once, handed to idle actors in order; further callers wait.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from ..device import resolve_backend
from ..errors import ClusterError, import_extra
from ..judge.config import JudgeConfig
from ..judge.reference import ReferenceReport
from ..judge.verdict import Verdict
from ..solution import Solution
from ..task import Task
from .pool import _check_reference, _evaluate, _evaluate_many, start_hosted_judge

RAY_TEMP_ROOT = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray"  # Ray's default session root


def require_ray() -> Any:
    return import_extra("ray", "ray", "the Ray pool", ClusterError)


def _answers(address: str, timeout_s: float = 5.0) -> bool:
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    if not parsed.hostname or not parsed.port:
        raise ClusterError(f"--ray-address takes HOST:PORT (the head node's GCS port, 6379 unless changed), "
                           f"'auto' or 'local'; got {address!r}")
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s):
            return True
    except OSError:
        return False


def connect(address: str | None) -> dict[str, float]:
    """Join the Ray cluster at ``address`` (HOST:PORT or 'auto'), or start one on this machine
    (None or 'local'); returns the cluster's resources."""
    ray = require_ray()
    if not ray.is_initialized():
        if address not in (None, "local", "auto") and not _answers(address):
            raise ClusterError(f"no Ray cluster answers at {address}: start one with `ray start --head "
                               "--port 6379` on the head node and `ray start --address HEAD:6379` on the others "
                               "(docs/cluster.md), or leave --ray-address out to start one on this machine")
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            raise ClusterError(f"could not join the Ray cluster at {address or 'auto'}: {exc}. "
                               "Is `ray start --head` running there (docs/cluster.md)?") from None
    return dict(ray.cluster_resources())


class _Host:
    """One Ray actor: a single local process that runs ``initializer`` once, then the jobs."""

    def __init__(self, initializer: Callable[..., None], initargs: tuple, max_tasks: int = 0) -> None:
        from pebble import ProcessPool

        self._pool = ProcessPool(1, max_tasks=max_tasks, initializer=initializer, initargs=initargs,
                                 context=multiprocessing.get_context("spawn"))

    def where(self) -> dict[str, Any]:
        import ray

        return {"host": socket.gethostname(), "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "gpus": [str(g) for g in ray.get_gpu_ids()]}

    def call(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> tuple[str, Any]:
        """("ok", result), ("timeout", None) or ("expired", why): the process died."""
        from pebble import ProcessExpired

        future = self._pool.schedule(fn, args=args, timeout=timeout_s)
        try:
            return "ok", future.result()
        except (TimeoutError, concurrent.futures.TimeoutError):
            return "timeout", None  # pebble has stopped the process; a fresh one takes its place
        except ProcessExpired as exc:
            return "expired", str(exc)

    def stop(self) -> None:
        self._pool.stop()
        self._pool.join(timeout=30)


class WorkerLost(ClusterError):
    """A job's process died on every try (the job itself kills it: memory, a crash)."""


class RayWorkerPool:
    """``workers`` Ray actors, each with one local process started by ``initializer(*initargs)``
    (and started afresh after ``max_tasks`` jobs, if set). ``await run(fn, args, timeout_s)`` runs
    ``fn(*args)`` in one of them."""

    def __init__(self, initializer: Callable[..., None], initargs: tuple, workers: int, *,
                 cpus_per_worker: float = 1.0, gpus_per_worker: float = 0.0, resources: dict[str, float] | None = None,
                 address: str | None = None,
                 max_pending: int | None = None, max_tasks: int = 0, start_timeout_s: float = 300.0,
                 unavailable_timeout_s: float = 600.0) -> None:
        if workers < 1:
            raise ClusterError(f"a Ray pool needs at least one worker; got {workers}")
        ray = require_ray()
        self.resources = connect(address)
        self.max_pending = max_pending or 2 * workers
        self.unavailable_timeout_s = unavailable_timeout_s
        options = {"num_cpus": cpus_per_worker, "num_gpus": gpus_per_worker, "resources": dict(resources or {}),
                   "max_restarts": -1, "max_task_retries": 0}  # a lost job is rerun here, by us, once
        actor = ray.remote(**options)(_Host)
        self._actors = [actor.remote(initializer, initargs, max_tasks) for _ in range(workers)]
        try:
            self.placement = ray.get([a.where.remote() for a in self._actors], timeout=start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self._kill_all()
            raise ClusterError(f"Ray could not place {workers} worker(s) of {cpus_per_worker:g} CPU and "
                               f"{gpus_per_worker:g} GPU each{_named(resources)} within {start_timeout_s:g} s; the "
                               f"cluster has {_resources(self.resources)}, some of it perhaps held by others. "
                               "Ask for fewer workers or add nodes") from None
        self._idle: asyncio.Queue | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._down: set[int] = set()  # actors being restarted by Ray
        self.busy: set[int] = set()   # actors running a job (their ``placement`` says where)
        self.pending = 0              # jobs taken and not yet answered
        self.most_pending = 0         # the largest ``pending`` seen
        self.retried = 0              # jobs judged again after their actor was lost
        self._closed = False

    def _bind(self) -> None:
        """The queues belong to the running event loop (a new one per ``asyncio.run``)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._idle = asyncio.Queue()
            for index in range(len(self._actors)):
                if index not in self._down:
                    self._idle.put_nowait(index)
            self._slots = asyncio.Semaphore(self.max_pending)
            for index in self._down:  # a lost actor's watch ended with the loop that started it
                asyncio.ensure_future(self._rejoin(index))

    async def run(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None = None) -> Any:
        """``fn(*args)``'s result; TimeoutError past ``timeout_s``; WorkerLost if the process
        running it died twice."""
        if self._closed:
            raise RuntimeError("the Ray pool is closed")
        self._bind()
        async with self._slots:
            self.pending += 1
            self.most_pending = max(self.most_pending, self.pending)
            try:
                return await self._run(fn, args, timeout_s)
            finally:
                self.pending -= 1

    async def _run(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> Any:
        ray = require_ray()
        expired = 0
        while True:
            index = await self._take()
            ref = self._actors[index].call.remote(fn, args, timeout_s)
            self.busy.add(index)
            try:
                status, value = await asyncio.shield(ref)
            except asyncio.CancelledError:
                # the actor finishes the job (its time limit still holds) before it takes another
                asyncio.ensure_future(self._release_when_done(index, ref))
                raise
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                self._done(index, lost=True)
                self.retried += 1
                continue  # judged again on another actor; the lost run returned nothing
            except BaseException:  # the job itself raised: the actor is free again
                self._done(index)
                raise
            self._done(index)
            if status == "ok":
                return value
            if status == "timeout":
                raise TimeoutError(f"the job did not finish within {timeout_s:g} s and was stopped")
            expired += 1
            if expired == 2:
                raise WorkerLost(f"the process running the job died twice: {value}")

    async def _take(self) -> int:
        waited = 0.0
        while True:
            try:
                return await asyncio.wait_for(self._idle.get(), timeout=10.0)
            except asyncio.TimeoutError:
                waited = waited + 10.0 if len(self._down) == len(self._actors) else 0.0
                if waited >= self.unavailable_timeout_s:
                    raise ClusterError(f"every worker of the Ray pool has been down for {waited:g} s "
                                       "(their nodes lost?); check `ray status`") from None

    async def _release_when_done(self, index: int, ref: Any) -> None:
        try:
            await ref
        except Exception:
            self._done(index, lost=True)
            return
        self._done(index)

    def _done(self, index: int, lost: bool = False) -> None:
        """The actor's job is over: it takes the next, or, lost, Ray restarts it and it takes jobs
        again once it answers."""
        self.busy.discard(index)
        if not lost:
            self._idle.put_nowait(index)
        elif index not in self._down:
            self._down.add(index)
            asyncio.ensure_future(self._rejoin(index))

    async def _rejoin(self, index: int) -> None:
        ray = require_ray()
        while not self._closed and index in self._down:
            try:
                self.placement[index] = await self._actors[index].where.remote()
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                await asyncio.sleep(1.0)
                continue
            if index in self._down:  # not already brought back by another watch
                self._down.discard(index)
                self._idle.put_nowait(index)
            return

    @property
    def down(self) -> int:
        """Actors lost and not yet back."""
        return len(self._down)

    def _kill_all(self) -> None:
        ray = require_ray()
        for actor in self._actors:
            ray.kill(actor, no_restart=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = require_ray()
        stops = [a.stop.remote() for a in self._actors]
        try:
            ray.get(stops, timeout=60)
        except Exception:
            pass  # a dead or stuck actor: killing it below kills its process's children with it
        self._kill_all()


def _resources(resources: dict[str, float]) -> str:
    return f"{resources.get('CPU', 0):g} CPU and {resources.get('GPU', 0):g} GPU"


def _named(resources: dict[str, float] | None) -> str:
    return "".join(f" and {amount:g} {name}" for name, amount in (resources or {}).items())


def _start_ray_judge(config: JudgeConfig, cpus: float) -> None:
    """A judge process of a Ray actor: threads for the CPUs the actor holds, and memory caps for
    as many judges as the node's CPUs hold such actors."""
    judges = max(1, int((os.cpu_count() or 1) // max(1.0, cpus)))
    start_hosted_judge(replace(config, judges_at_once=max(config.judges_at_once, judges)), judges, watch_parent=True)


class RayJudgePool:
    """A ``judge.pools.JudgePool`` on Ray. ``concurrency``: on the CUDA backend, judges per GPU of the
    cluster (default 1); on the CPU backend, judges in all, of ``cpus_per_worker`` CPUs each
    (default: as many as the cluster's CPUs hold). ``workers`` fixes the total instead. ``resource``:
    a custom Ray resource that only judge nodes carry (``ray start --resources '{"judge": 8}'``),
    so that judges land there and not on GPUs a trainer sharing the cluster holds."""

    stops_overdue_runs = True  # judge.pools.stops_overdue_runs: its calls take timeout_s and stop the run

    def __init__(self, config: JudgeConfig | None = None, *, address: str | None = None,
                 concurrency: int | None = None, workers: int | None = None, cpus_per_worker: float = 1.0,
                 resource: str | None = None, max_pending: int | None = None) -> None:
        config = config or JudgeConfig()
        resources = connect(address)
        gpus = int(resources.get("GPU", 0))
        # The driver may sit on a node without a GPU: the cluster decides the default backend.
        backend = config.backend or ("cuda" if gpus else "cpu")
        if backend == "cuda" and not gpus:
            raise ClusterError(f"a CUDA run needs GPUs, and the Ray cluster at {address or 'this machine'} has "
                               "none: start GPU nodes with `ray start --address HEAD:6379` (Ray counts their "
                               "GPUs), or judge on the CPU backend (--device cpu)")
        if backend == "cpu":
            resolve_backend("cpu")
        # Ray gives every GPU actor its own CUDA_VISIBLE_DEVICES: inside it, the device is index 0.
        self.config = replace(config, backend=backend, device_index=0 if backend == "cuda" else config.device_index,
                              hidden_paths=tuple(config.hidden_paths) + (str(RAY_TEMP_ROOT),))
        self.backend = backend
        self.cache_dir = Path(self.config.cache_dir)  # on every node: each keeps its own builds and baselines
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        if resource and not resources.get(resource):
            raise ClusterError(f"no node of the Ray cluster carries the resource {resource!r}: start the judge nodes "
                               f"with `ray start --address HEAD:6379 --resources '{{\"{resource}\": GPUS}}'`")
        if backend == "cuda":
            per_gpu_workers = max(1, concurrency or 1)
            judge_gpus = int(resources[resource]) if resource else gpus  # a judge node's resource counts its GPUs
            workers = workers or judge_gpus * per_gpu_workers
            gpus_each = share = 1.0 / per_gpu_workers
            cpus = max(1.0, resources.get("CPU", 1) / max(1, workers))
        else:
            workers = workers or concurrency or max(1, int(resources.get("CPU", 1) // cpus_per_worker))
            gpus_each, share, cpus = 0.0, 1.0, cpus_per_worker
        self.workers = RayWorkerPool(_start_ray_judge, (self.config, cpus), workers, cpus_per_worker=cpus,
                                     gpus_per_worker=gpus_each, resources={resource: share} if resource else None,
                                     address=address, max_pending=max_pending)
        self.max_concurrent = workers

    async def evaluate(self, task: Task, solution: Solution, stage: str, timeout_s: float | None = None) -> Verdict:
        """The judge's verdict; a run longer than ``timeout_s`` is stopped and raises TimeoutError."""
        return await self.workers.run(_evaluate, (task, solution, stage), timeout_s)

    async def evaluate_many(self, task: Task, solutions: list[Solution], stage: str,
                            timeout_s: float | None = None) -> list[Verdict]:
        """The candidates of one task judged together on one judge (``Judge.evaluate_many``)."""
        return await self.workers.run(_evaluate_many, (task, solutions, stage), timeout_s)

    async def check_reference(self, task: Task) -> ReferenceReport:
        return await self.workers.run(_check_reference, (task,), None)

    def close(self) -> None:
        self.workers.close()

    def __enter__(self) -> "RayJudgePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

