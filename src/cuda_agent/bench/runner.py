"""A benchmark run: check every problem's reference, judge every candidate, keep every result.

Results are appended to ``OUT/results.jsonl`` the moment each finishes (one line per reference
check and per judged candidate); a rerun with the same ``OUT`` skips what is recorded there, so
an interrupted run loses at most the evaluations in flight. A candidate is judged again only
when its files or its problem's source changed. Each verdict is also kept in full under
``OUT/verdicts/``.

Parallelism: one judge pool per GPU, each running several evaluations at once (building and
verifying use the CPU cores); the judge's own per-device lock times one job per GPU at a time.
A problem's candidates wait for its reference check, whose baselines their verdicts then reuse.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from ..errors import BenchmarkError
from ..files import write_atomic
from ..judge.pools import JudgePool
from ..judge.reference import ReferenceReport
from ..solution import Solution, load_solution
from ..task import Task
from .kernelbench import Problem
from .progress import BenchProgress, describe_job
from .solutions import Candidate

RESULTS_FILE = "results.jsonl"
VERDICTS_DIR = "verdicts"
FORMAT_VERSION = 1


class ResultsLog:
    """Append-only JSON lines; a line cut short by a crash is ignored when read back."""

    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # the partial last line of an interrupted run
            if isinstance(record, dict) and record.get("version") == FORMAT_VERSION:
                records.append(record)
        return records

    def append(self, record: dict) -> None:
        line = json.dumps({"version": FORMAT_VERSION, **record}, default=str).encode()
        with self.path.open("a+b") as fh:
            # A crash mid-write may leave a partial line: start on a fresh one if so.
            size = fh.seek(0, 2)
            if size:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")  # appends always go to the end, wherever the read left off
            fh.write(line + b"\n")
            fh.flush()


@dataclass
class Job:
    problem: Problem
    task: Task
    candidate: Candidate | None = None   # None: the problem's reference check

    @property
    def key(self) -> str:
        return self.candidate.key if self.candidate else f"{self.problem.key}#reference"


@dataclass
class BenchRun:
    out: Path
    problems: dict[int, list[Problem]]
    candidates: dict[str, list[Candidate]]
    solutions_root: Path | None = None
    log: ResultsLog = field(init=False)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = ResultsLog(self.out / RESULTS_FILE)

    # -- what is left to do -------------------------------------------------------------------
    def jobs(self) -> tuple[list[Job], list[Job]]:
        """(reference checks, candidates) not yet recorded for the current sources."""
        done = {(r["key"], r.get("fingerprint")) for r in self.log.read() if not _worth_retrying(r)}
        references, candidates = [], []
        for level in sorted(self.problems):
            for problem in self.problems[level]:
                task = problem.task()
                job = Job(problem, task)
                if (job.key, task.sha256) not in done:
                    references.append(job)
                for candidate in self.candidates.get(problem.key, []):
                    job = Job(problem, task, candidate)
                    if (job.key, self.fingerprint(job)) not in done:
                        candidates.append(job)
        return references, candidates

    @staticmethod
    def fingerprint(job: Job) -> str:
        """What a recorded result was computed from: the task and the solution's files."""
        return job.task.sha256 if job.candidate is None else _load(job)[1]

    # -- running --------------------------------------------------------------------------------
    async def run(self, pools: list[Any], jobs_per_pool: int, console: Console | None = None) -> None:
        references, candidates = self.jobs()
        total = len(references) + len(candidates)
        if not total:
            return
        checked = {job.problem.key: asyncio.Event() for job in references}
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for job in references + candidates:  # every reference check is taken before any candidate
            queue.put_nowait(job)

        progress = BenchProgress(console, total)

        async def worker(pool: JudgePool) -> None:
            while True:
                try:
                    job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                line = progress.start(_describe(job))
                try:
                    if job.candidate is None:
                        line("running the reference and checking it reproduces itself")
                        record = await self._check(pool, job, line)
                    else:
                        if (event := checked.get(job.problem.key)) and not event.is_set():
                            line("waiting for the problem's baselines")
                            await event.wait()
                        record = await self._judge(pool, job, line)
                except Exception as exc:  # the judge itself failed: nothing is recorded, a rerun retries
                    failed.append(f"{job.key}: {type(exc).__name__}: {exc}")
                    progress.finish(line, "judge failed")
                    continue
                finally:
                    if job.candidate is None:
                        checked[job.problem.key].set()
                self.log.append(record)
                progress.finish(line, record["status"])

        failed: list[str] = []
        with progress:
            await asyncio.gather(*(worker(pool) for pool in pools for _ in range(max(1, jobs_per_pool))))
        if failed:
            raise BenchmarkError(f"the judge failed on {len(failed)} job(s), which are not recorded; rerun the "
                                 "same command to retry them (the rest is kept):\n  " + "\n  ".join(failed[:10]))

    async def _check(self, pool: JudgePool, job: Job, progress: Callable[[str], None]) -> dict:
        started = time.perf_counter()
        report: ReferenceReport = await pool.check_reference(job.task, **_relay(pool, progress))
        return {"kind": "reference", "key": job.key, "fingerprint": job.task.sha256, **_where(job),
                "status": "ok" if report.ok else "reference_error", "report": report.to_dict(),
                "seconds": time.perf_counter() - started}

    async def _judge(self, pool: JudgePool, job: Job, progress: Callable[[str], None]) -> dict:
        candidate = job.candidate
        solution, fingerprint, failure = _load(job)
        record = {"kind": "solution", "key": job.key, "fingerprint": fingerprint, **_where(job),
                  "sample": candidate.sample, "solution": self._relative(candidate.path)}
        if failure is not None:
            return {**record, **failure}
        started = time.perf_counter()
        verdict = await pool.evaluate(job.task, solution, "profile", **_relay(pool, progress))
        data = verdict.to_dict()
        path = self.out / VERDICTS_DIR / f"level{job.problem.level}" / f"{job.problem.stem}-{_sample(candidate)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, indent=1, default=str))
        timings = data.get("timings") or {}
        return {**record, "status": verdict.status, "fault": verdict.settings.get("fault"),
                "correct": verdict.correct, "reward": verdict.reward,
                "speedup_vs_eager": verdict.speedup_vs_eager, "speedup_vs_compile": verdict.speedup_vs_compile,
                **{f"sol_vs_{name}": verdict.sol_score.get(name) for name in ("eager", "compile")},
                **{f"{name}_ms": (timings.get(name) or {}).get("median_ms") for name in ("candidate", "eager", "compile")},
                "error": verdict.error, "no_speedup": no_speedup_reason(data),
                "verdict": str(path.relative_to(self.out)),
                "stage_seconds": dict(verdict.seconds), "seconds": time.perf_counter() - started}

    def _relative(self, path: Path) -> str:
        if self.solutions_root is not None:
            try:
                return str(path.relative_to(self.solutions_root))
            except ValueError:
                pass
        return str(path)


def _relay(pool: JudgePool, progress: Callable[[str], None]) -> dict:
    """The progress argument for a pool that carries the judge's messages back (a local one)."""
    return {"progress": progress} if getattr(pool, "relays_progress", False) else {}


def _describe(job: Job) -> str:
    return describe_job(job.problem.level, job.problem.name, job.candidate.sample if job.candidate else None,
                        reference=job.candidate is None)


NOT_CLAIMED = "no speedup is claimed: "  # how the judge's note on an unbelieved timing starts
UNSTABLE = "the timing was not stable enough to claim a speedup"


def no_speedup_reason(verdict: dict) -> str | None:
    """Why a correct verdict carries no speed-up, from the verdict's own words (None: it has one,
    or is not correct). An unstable timing is named by its cause, which the judge notes."""
    if not verdict.get("correct"):
        return None
    if verdict.get("speedup_vs_eager") is not None:  # paid over eager; over torch.compile perhaps not
        compile_reason = verdict.get("compile_speedup_withheld")
        return f"no speed-up vs torch.compile: {compile_reason}" if compile_reason else None
    causes = [note[len(NOT_CLAIMED):] for note in verdict.get("notes") or [] if note.startswith(NOT_CLAIMED)]
    withheld = [part for part in (verdict.get("speedup_withheld") or "").split("; ") if part]
    if causes:
        withheld = [part for part in withheld if part != UNSTABLE]
    reasons = causes + withheld
    if reasons:
        return "no speed-up: " + "; ".join(reasons)
    return "no speed-up: the candidate was not timed"


def _where(job: Job) -> dict:
    return {"level": job.problem.level, "problem_id": job.problem.problem_id, "name": job.problem.name}


def _sample(candidate: Candidate) -> str:
    return "only" if candidate.sample is None else f"sample{candidate.sample}"


def _load(job: Job) -> tuple[Solution | None, str, dict | None]:
    """A candidate's solution (loaded once), the fingerprint its result is recorded under, and the
    failure to record instead of a verdict when there is nothing to judge."""
    prefix, candidate = job.task.sha256[:16], job.candidate
    if not candidate.path.exists():
        return None, f"{prefix}:missing", failure_record(
            "missing", "the agent found no correct solution in this episode" if candidate.sample is not None
            else "no solution")
    try:
        solution = load_solution(candidate.path)
    except Exception as exc:  # an unreadable solution is recorded as a failure, keyed by the error
        return (None, f"{prefix}:unloadable:{type(exc).__name__}:{exc}",
                failure_record("compile_error", f"the solution cannot be loaded: {exc}"))
    return solution, f"{prefix}:{solution.sha256}", None


def failure_record(status: str, error: str) -> dict:
    """The result fields of a problem or sample that has no verdict: a failure."""
    return {"status": status, "correct": False, "reward": -1, "speedup_vs_eager": None, "speedup_vs_compile": None,
            "sol_vs_eager": None, "sol_vs_compile": None, "candidate_ms": None, "eager_ms": None, "compile_ms": None, "error": error}


def _worth_retrying(record: dict) -> bool:
    """Failures that are the task's or the machine's, not the solution's: judged again on rerun."""
    return record.get("status") == "reference_error" or record.get("fault") == "task"


def check_candidates_exist(candidates: dict[str, list[Candidate]]) -> None:
    if not any(candidates.values()):
        raise BenchmarkError("no solution was found for any selected problem. Solutions go in "
                             "level{N}/{id}_{Name}/ (a workspace or model_new.py), level{N}/{id}/, or as "
                             "KernelBench generations level_{N}_problem_{id}_sample_{S}_kernel.py")
