"""Judge pools for training: evaluations with a time limit that really stops the judge, and one
pool per process and settings, shared by every trajectory and reward in a verl worker.

``TrainJudgePool`` runs each judge in a process of its own, as ``cluster.LocalJudgePool`` does,
but through pebble, so ``evaluate(..., timeout_s=...)`` ends a run that outlives its limit: the
pool process is terminated (the judge's own workers, which run in sessions of their own, are
killed as it unwinds), a fresh one takes its place and the slot is free again only then. Without
this, an abandoned run would keep judging in the background while the next one starts.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..cluster.pool import (SpreadJudgePool, _check_reference, _evaluate, _evaluate_many, default_concurrency,
                            settle_pool, start_hosted_judge)
from ..errors import ConfigError
from ..judge.config import JudgeConfig, TimingConfig
from ..judge.pools import JudgePool
from .extras import TrainError


class TrainJudgePool:
    """A ``JudgePool`` of ``max_concurrent`` processes whose runs can be given a time limit."""

    stops_overdue_runs = True  # judge.pools.stops_overdue_runs

    # the functions a pool process runs (module level, so that a spawned process can import them)
    start: Callable[..., None] = staticmethod(start_hosted_judge)
    run_evaluate: Callable[..., Any] = staticmethod(_evaluate)
    run_evaluate_many: Callable[..., Any] = staticmethod(_evaluate_many)
    run_check_reference: Callable[..., Any] = staticmethod(_check_reference)

    def __init__(self, config: JudgeConfig | None = None, max_concurrent: int | None = None) -> None:
        from pebble import ProcessPool

        settle_pool(self, config, max_concurrent)
        # spawn, not fork: the trainer's process has threads and an event loop that a fork would copy
        self._pool = ProcessPool(self.max_concurrent, initializer=type(self).start,
                                 initargs=(self.config, self.max_concurrent),
                                 context=multiprocessing.get_context("spawn"))
        self._closed = False

    async def evaluate(self, task: Any, solution: Any, stage: str, timeout_s: float | None = None) -> Any:
        """The judge's verdict; a run longer than ``timeout_s`` is stopped and raises TimeoutError."""
        return await self._submit(type(self).run_evaluate, (task, solution, stage), timeout_s)

    async def evaluate_many(self, task: Any, solutions: list[Any], stage: str, timeout_s: float | None = None) -> list[Any]:
        """The verdicts of one task's candidates judged together (``Judge.evaluate_many``); a run
        longer than ``timeout_s`` is stopped and raises TimeoutError."""
        return await self._submit(type(self).run_evaluate_many, (task, solutions, stage), timeout_s)

    async def check_reference(self, task: Any) -> Any:
        return await self._submit(type(self).run_check_reference, (task,), None)

    async def _submit(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> Any:
        from pebble import ProcessExpired

        if self._closed:
            raise RuntimeError("the judge pool is closed")
        for attempt in (1, 2):
            future = self._pool.schedule(fn, args=args, timeout=timeout_s)
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                future.cancel()  # pebble stops the process running it
                raise
            except ProcessExpired:
                # the pool process died (killed, out of memory): the judge itself never raises for a
                # bad candidate. Run this evaluation once more in a fresh process.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._closed = True
        self._pool.stop()
        self._pool.join()

    def __enter__(self) -> "TrainJudgePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def make_judge_pool(settings: dict[str, Any] | None) -> Any:
    """``settings``: backend (cuda or cpu; default: cuda where a GPU is visible), cache_dir,
    concurrency (judge runs at once; with the Ray pool or several ``gpus``, per GPU), pool (local,
    the default, or ray), gpus (the local pool's GPUs, by index: one pool of judges on each; default
    the first), ray_address and ray_resource (``cluster.ray_pool.RayJudgePool``), exclusive_timing
    (``JudgeConfig.exclusive_timing``), timing (``TimingConfig``'s fields, e.g. shorter sessions
    where the judge runs on CPUs: ``{"target_seconds": 0.2}``)."""
    settings = dict(settings or {})
    extra: dict[str, Any] = {"cache_dir": Path(settings["cache_dir"])} if settings.get("cache_dir") else {}
    if settings.get("exclusive_timing"):
        extra["exclusive_timing"] = True
    if settings.get("timing"):
        extra["timing"] = timing_config(settings["timing"])
    config = JudgeConfig(backend=settings.get("backend"), **extra)
    kind = settings.get("pool") or "local"
    if kind == "ray":
        from ..cluster import make_pool

        resource = {"resource": settings["ray_resource"]} if settings.get("ray_resource") else {}
        return make_pool("ray", config, settings.get("concurrency"), settings.get("ray_address"), **resource)
    if kind != "local" or settings.get("ray_address"):
        raise TrainError(f"the judge pool is local or ray (and a Ray address needs the ray pool); got {kind!r}")
    return local_judge_pool(config, settings.get("concurrency"), settings.get("gpus"))


def local_judge_pool(config: JudgeConfig, concurrency: int | None = None,
                     gpus: list[int] | None = None) -> TrainJudgePool | SpreadJudgePool:
    """Judges in processes on this machine, timing on ``gpus`` (indices; default the first): one
    pool of ``concurrency`` judges on each, a run going to the least busy."""
    gpus = list(gpus or [])
    if len(gpus) <= 1:
        return TrainJudgePool(replace(config, device_index=gpus[0]) if gpus else config, concurrency)
    # The host's cores build and check for every GPU's judges, so by default they share the
    # machine's judges; every worker's memory cap counts them all.
    each = concurrency or max(1, default_concurrency() // len(gpus))
    at_once = replace(config, judges_at_once=max(config.judges_at_once, each * len(gpus)))
    return SpreadJudgePool([TrainJudgePool(replace(at_once, device_index=g), each) for g in gpus], owns_pools=True)


JUDGES_SHARE_THE_TRAINING_GPU = (
    "The judges will time kernels on GPU {gpu}, where the model trains: their timings slow and vary with "
    "training's load, and a kernel the judge cannot time steadily is paid no speedup. On a machine with a "
    "second GPU the judges go there by default, or name theirs with --judge-gpus (e.g. --judge-gpus 1).")


def parse_gpus(given: str | None) -> list[int] | None:
    """--judge-gpus "1,2" as [1, 2]; None when not given."""
    if not given:
        return None
    try:
        gpus = [int(part) for part in given.split(",") if part.strip()]
    except ValueError:
        gpus = []
    if not gpus:
        raise TrainError(f"--judge-gpus takes GPU indices separated by commas, e.g. 1 or 1,2; got {given!r}")
    return gpus


def place_judges(given: list[int] | None, visible: int, training: int = 0) -> tuple[list[int], str | None]:
    """The GPUs a one-machine run's judges time on, and a warning where that is the GPU the model
    trains on (``training``). ``given``: the GPUs asked for (--judge-gpus); by default every
    visible GPU but the training one, and the training GPU only when it is the only one."""
    if given:
        wrong = sorted({g for g in given if not 0 <= g < visible})
        if wrong:
            raise TrainError(f"--judge-gpus names GPU(s) {', '.join(map(str, wrong))}, but this process sees "
                             f"{visible} GPU(s), numbered from 0 (CUDA_VISIBLE_DEVICES numbers them)")
        chosen = sorted(set(given))
    else:
        chosen = [g for g in range(visible) if g != training] or [training]
    return chosen, JUDGES_SHARE_THE_TRAINING_GPU.format(gpu=training) if training in chosen else None


def timing_config(fields: dict[str, Any]) -> TimingConfig:
    """The judge's ``TimingConfig`` from the settings' ``timing`` mapping, with its errors named."""
    try:
        return TimingConfig.from_mapping(fields)
    except ConfigError as exc:
        where = "" if exc.setting == "timing" else f"{exc.setting} "
        raise TrainError(f"the judge's timing setting {where}{exc.detail}") from None


_pools: dict[str, Any] = {}
_lock = threading.Lock()


def _key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def register_pool(settings: dict[str, Any], pool: JudgePool) -> None:
    """Use ``pool`` wherever these settings are asked for (a pool made by the caller, say with
    its own timing settings)."""
    with _lock:
        _pools[_key(settings)] = pool


def judge_pool(settings: dict[str, Any] | None) -> Any:
    """The process's pool for ``settings`` (``make_judge_pool``), made on first use."""
    settings = dict(settings or {})
    key = _key(settings)
    with _lock:
        if key not in _pools:
            _pools[key] = make_judge_pool(settings)
        return _pools[key]
