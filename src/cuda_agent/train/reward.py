"""One reward function for every engine: a reply in, the judge's reward out.

``JudgeReward.score(reply, task)`` finds the solution in the reply (``replies``), checks its
format, has the judge profile it through a judge pool and returns the paper's milestone reward
(Eq. 1: -1, 1, 2, 3), with ``kind="continuous"`` the ablation's t_compile / t, or with ``kind="sol"``
the SOL score against torch.compile (0.5 at its time, 1 at the device's limit; cuda only). It never
raises for what the model wrote: a reply without a usable solution scores -1 with the reason,
and so does a judge that fails or runs past ``timeout_s`` for each judgement the task takes (one
per workload where it declares several; stopped there by a pool that takes a time limit,
``pools.TrainJudgePool``).

* **Bounded**: at most ``concurrency`` judge runs at once (the pool has its own bound too).
* **Judged together**: ``score_many`` judges the replies of one task (a GRPO group) in group runs
  of the pool's, each against one reference run (``Judge.evaluate_many``), where the pool offers
  it: split into at most ``concurrency`` runs, so that a group uses every slot it may.
* **Judged once**: results are kept by content hash (task, solution, stage, kind); identical
  solutions in flight at the same moment share one judge run. With ``log_path`` every result is
  appended to a JSONL file as it comes and read back on start, so a rerun judges nothing twice.
  A correct solution whose speed the judge did not settle is judged again when it comes again
  (``speed_settled``).
* **Logged**: the result carries the verdict's fields (status, correct, speedups, timings) for the
  trainers' logs.

verl calls ``verl_compute_score`` (its custom reward function signature); TRL calls a
``TRLRewardFunc``; both are thin adapters over one ``JudgeReward``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..agent.env import REWARD_FIELDS, REWARD_KINDS
from ..cluster.pool import group_timeout, split_group
from ..errors import SolutionFormatError
from ..judge.pools import JudgePool, stops_overdue_runs
from ..solution import validate_solution
from ..task import Task
from ..workloads import judge_runs
from .replies import ReplyFormatError, solution_from_reply

KINDS = REWARD_KINDS  # the agent environment's reward kinds: one list for both
TIMEOUTS = (asyncio.TimeoutError, concurrent.futures.TimeoutError, TimeoutError)


REWARD_STAGES = ("verify", "profile")
LOGGED_FIELDS = ("status", "correct", "reward", "reward_continuous", "reward_sol", "speedup_vs_eager", "speedup_vs_compile",
                 "stage", "error")


@dataclass
class RewardResult:
    score: float
    reason: str = ""                                # why the score is -1 without a verdict; "" when judged
    fields: dict[str, Any] = field(default_factory=dict)  # the verdict's fields, for logging
    cached: bool = False
    key: str = ""
    settled: bool = True  # judging the solution again would pay the same (``speed_settled``): kept


    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_fields(verdict: Any) -> dict[str, Any]:
    data = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
    fields = {k: data.get(k) for k in LOGGED_FIELDS}
    timings = data.get("timings") or {}
    for name in ("candidate", "eager", "compile"):
        stats = timings.get(name)
        fields[f"{name}_ms"] = stats.get("median_ms") if isinstance(stats, dict) else None
    return fields


def speed_settled(verdict: Any) -> bool:
    """Whether judging the same solution again would pay the same but for noise: not where the
    judge withheld a correct solution's speedup (a timing or a baseline that did not settle, which
    another run may settle). Such a result is not kept: one unlucky timing would pay every later
    copy of a fast kernel as if it were slow, and that task would teach nothing."""
    return not (getattr(verdict, "correct", False) and (getattr(verdict, "speedup_withheld", None)
                                                        or getattr(verdict, "compile_speedup_withheld", None)))


def content_key(task: Task, solution_sha: str, stage: str, kind: str) -> str:
    return hashlib.sha256(f"{task.sha256}:{solution_sha}:{stage}:{kind}".encode()).hexdigest()


class JudgeReward:
    """Scores replies with ``pool`` (a ``judge.pools.JudgePool``)."""

    def __init__(self, pool: JudgePool, *, kind: str = "milestone", stage: str = "profile", concurrency: int = 4,
                 timeout_s: float = 900.0, log_path: Path | str | None = None, use_cache: bool = True,
                 group: bool = True) -> None:
        if kind not in KINDS:
            raise ValueError(f"reward kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if stage not in REWARD_STAGES:
            raise ValueError(f"reward stage must be one of {', '.join(REWARD_STAGES)}, not {stage!r}")
        if kind in ("continuous", "sol") and stage != "profile":
            # Both need the candidate timed: at verify every correct reply would score alike.
            raise ValueError(f"the {kind} reward needs the candidate timed: use stage='profile', or the milestone "
                             "reward (which pays 1 for a correct reply at verify)")
        if concurrency < 1 or timeout_s <= 0:
            raise ValueError("reward concurrency must be at least 1 and timeout_s positive")
        self.pool, self.kind, self.stage = pool, kind, stage
        self.concurrency, self.timeout_s = concurrency, timeout_s
        self.log_path = Path(log_path) if log_path else None
        self.use_cache = use_cache  # off only to measure the judge itself (benchmarks)
        self.group = group  # score_many judges each task's replies in one group run, where the pool can
        self.cache: dict[str, RewardResult] = {}
        self.judge_calls = 0
        self.judge_seconds = 0.0
        self._lock = threading.Lock()
        self._gates: dict[int, asyncio.Semaphore] = {}
        self._inflight: dict[tuple[int, str], asyncio.Future] = {}
        if self.log_path and self.log_path.is_file():
            self._load(self.log_path)

    def _load(self, path: Path) -> None:
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if entry.get("key") and entry.get("judged") and entry.get("settled", True):
                self.cache[entry["key"]] = RewardResult(entry["score"], entry.get("reason", ""),
                                                        entry.get("fields", {}), True, entry["key"])

    def _log(self, result: RewardResult, task: Task, judged: bool, seconds: float) -> None:
        if self.log_path is None:
            return
        entry = {"key": result.key, "task": task.name, "score": result.score, "reason": result.reason,
                 "fields": result.fields, "judged": judged, "cached": result.cached, "settled": result.settled,
                 "seconds": round(seconds, 3), "time": time.time()}
        with self._lock:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a") as fh:
                fh.write(json.dumps(entry, default=str) + "\n")

    def _gate(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        with self._lock:
            if loop_id not in self._gates:
                self._gates[loop_id] = asyncio.Semaphore(self.concurrency)
            return self._gates[loop_id]

    def _prepare(self, reply: str, task: Task, started: float) -> RewardResult | tuple[Any, str]:
        """A reply's score where it needs no judge (no usable solution, or judged before), logged;
        else its solution and content key."""
        try:
            solution = solution_from_reply(reply)
            validate_solution(solution, task, self.pool.backend)
        except Exception as exc:  # noqa: BLE001 - whatever a reply holds, it scores -1: the reward never raises
            why = str(exc) if isinstance(exc, (ReplyFormatError, SolutionFormatError)) else f"{type(exc).__name__}: {exc}"
            result = RewardResult(-1.0, f"no usable solution: {why}", {"status": "no_solution"})
            self._log(result, task, False, time.monotonic() - started)
            return result
        key = content_key(task, solution.sha256, self.stage, self.kind)
        if self.use_cache and key in self.cache:
            hit = self.cache[key]
            result = RewardResult(hit.score, hit.reason, hit.fields, True, key)
            self._log(result, task, False, time.monotonic() - started)
            return result
        return solution, key

    async def score(self, reply: str, task: Task) -> RewardResult:
        started = time.monotonic()
        prepared = self._prepare(reply, task, started)
        if isinstance(prepared, RewardResult):
            return prepared
        solution, key = prepared
        flight = (id(asyncio.get_running_loop()), key)
        if self.use_cache and flight in self._inflight:  # the same solution is being judged right now: share its result
            shared = await asyncio.shield(self._inflight[flight])
            result = RewardResult(shared.score, shared.reason, shared.fields, True, key)
            self._log(result, task, False, time.monotonic() - started)
            return result
        if not self.use_cache:
            result = await self._judge(task, solution, key)
            self._log(result, task, True, time.monotonic() - started)
            return result
        future = asyncio.get_running_loop().create_future()
        self._inflight[flight] = future
        try:
            result = await self._judge(task, solution, key)
            future.set_result(result)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so no "never retrieved" warning when nobody shares it
            raise
        finally:
            del self._inflight[flight]
        self._log(result, task, True, time.monotonic() - started)
        return result

    async def _limit(self, task: Task) -> float:
        """``timeout_s`` for each judgement ``task`` takes (one per workload where it declares
        several); reading its workloads starts a process, so off the event loop."""
        return self.timeout_s * await asyncio.to_thread(judge_runs, task)

    async def _evaluate(self, task: Task, solution: Any, limit: float) -> Any:
        """The verdict within ``limit`` seconds. A pool that takes a time limit (``pools.TrainJudgePool``)
        stops the run itself, so the slot is free only when the judge really is; with any other
        pool the wait alone ends, and the run goes on in the background."""
        if stops_overdue_runs(self.pool):
            return await self.pool.evaluate(task, solution, self.stage, timeout_s=limit)
        return await asyncio.wait_for(self.pool.evaluate(task, solution, self.stage), limit)

    async def _judge(self, task: Task, solution: Any, key: str) -> RewardResult:
        limit = await self._limit(task)
        async with self._gate():
            started = time.monotonic()
            try:
                verdict = await self._evaluate(task, solution, limit)
            except TIMEOUTS:
                return RewardResult(-1.0, f"the judge took longer than {limit:.0f} s",
                                    {"status": "timeout"}, False, key)
            except Exception as exc:  # noqa: BLE001 - a failed judge run scores -1, it never ends training
                return RewardResult(-1.0, f"the judge failed: {type(exc).__name__}: {exc}",
                                    {"status": "judge_error"}, False, key)
            finally:
                self.judge_calls += 1
                self.judge_seconds += time.monotonic() - started
        return self._result(verdict, key)

    def _result(self, verdict: Any, key: str) -> RewardResult:
        fields = verdict_fields(verdict)
        value = getattr(verdict, REWARD_FIELDS[self.kind])
        result = RewardResult(float(value), "" if verdict.correct else (verdict.error or verdict.status), fields,
                              False, key, speed_settled(verdict))
        if result.settled:
            self.cache[key] = result
        return result

    async def score_many(self, replies: list[str], tasks: list[Task]) -> list[RewardResult]:
        """Every reply's score. With ``group`` and a pool that judges groups (``evaluate_many``),
        the replies of one task (a GRPO group) are judged in one run against one reference run;
        each reply still scores what it would alone."""
        if not (self.group and hasattr(self.pool, "evaluate_many")):
            return list(await asyncio.gather(*(self.score(r, t) for r, t in zip(replies, tasks, strict=True))))
        started = time.monotonic()
        results: list[RewardResult | None] = [None] * len(replies)
        groups: dict[str, list[tuple[int, Task, Any, str]]] = {}
        for i, (reply, task) in enumerate(zip(replies, tasks, strict=True)):
            prepared = self._prepare(reply, task, started)
            if isinstance(prepared, RewardResult):
                results[i] = prepared
            else:
                groups.setdefault(task.sha256, []).append((i, task, *prepared))
        await asyncio.gather(*(self._score_group(members, results, started) for members in groups.values()))
        return results  # type: ignore[return-value]  # every place filled

    async def _score_group(self, members: list[tuple[int, Task, Any, str]], results: list, started: float) -> None:
        """Judge one task's replies in one group run: each solution once (one in flight elsewhere
        is waited for), and every reply given its solution's result."""
        loop, task = asyncio.get_running_loop(), members[0][1]
        judged_here: list[tuple[Any, str, asyncio.Future]] = []  # (solution, key, its result to come)
        waits: list[tuple[int, str, asyncio.Future, bool]] = []  # (place, key, result, judged for this place)
        mine: dict[str, asyncio.Future] = {}
        for i, _, solution, key in members:
            flight = (id(loop), key)
            if self.use_cache and key in mine:
                waits.append((i, key, mine[key], False))
            elif self.use_cache and flight in self._inflight:
                waits.append((i, key, self._inflight[flight], False))
            else:
                future = loop.create_future()
                judged_here.append((solution, key, future))
                if self.use_cache:
                    mine[key] = self._inflight[flight] = future
                waits.append((i, key, future, True))
        try:
            if judged_here:
                parts = split_group([(s, k) for s, k, _ in judged_here], self.concurrency)
                outcomes = [r for part in await asyncio.gather(*(self._judge_group(task, p) for p in parts))
                            for r in part]
                for (_, _, future), result in zip(judged_here, outcomes):
                    future.set_result(result)
        except BaseException as exc:
            for _, _, future in judged_here:
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # retrieved here, so no "never retrieved" warning when nobody shares it
            raise
        finally:
            if self.use_cache:
                for _, key, _ in judged_here:
                    self._inflight.pop((id(loop), key), None)
        for i, key, future, first in waits:
            result = await asyncio.shield(future)
            if not first:
                result = RewardResult(result.score, result.reason, result.fields, True, key)
            results[i] = result
            self._log(result, task, first, time.monotonic() - started)

    async def _judge_group(self, task: Task, items: list[tuple[Any, str]]) -> list[RewardResult]:
        """One group run of the pool's for ``items`` (solution, key), holding one slot of the
        reward's concurrency; its time limit grows with the group (``group_timeout``) and with
        the task's workloads."""
        limit = group_timeout(await self._limit(task), len(items))
        solutions = [s for s, _ in items]
        async with self._gate():
            started = time.monotonic()
            try:
                if stops_overdue_runs(self.pool):
                    verdicts = await self.pool.evaluate_many(task, solutions, self.stage, timeout_s=limit)
                else:
                    verdicts = await asyncio.wait_for(self.pool.evaluate_many(task, solutions, self.stage), limit)
                if len(verdicts) != len(items):
                    raise RuntimeError(f"{len(verdicts)} verdicts for {len(items)} solutions")
            except TIMEOUTS:
                return [RewardResult(-1.0, f"the judge took longer than {limit:.0f} s for a group of {len(items)}",
                                     {"status": "timeout"}, False, key) for _, key in items]
            except Exception as exc:  # noqa: BLE001 - a failed judge run scores -1, it never ends training
                return [RewardResult(-1.0, f"the judge failed: {type(exc).__name__}: {exc}",
                                     {"status": "judge_error"}, False, key) for _, key in items]
            finally:  # each candidate waited as long as its group
                self.judge_calls += len(items)
                self.judge_seconds += (time.monotonic() - started) * len(items)
        return [self._result(verdict, key) for verdict, (_, key) in zip(verdicts, items)]

    def score_blocking(self, replies: list[str], tasks: list[Task]) -> list[RewardResult]:
        """``score_many`` for callers without an event loop."""
        return asyncio.run(self.score_many(replies, tasks))
