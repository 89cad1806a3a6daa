"""The run's bookkeeping with a stand-in judge pool: a failing judge job is retried on rerun."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from cuda_agent.bench.kernelbench import discover
from cuda_agent.bench.runner import RESULTS_FILE, BenchRun, ResultsLog
from cuda_agent.bench.solutions import find_candidates
from cuda_agent.errors import BenchmarkError
from cuda_agent.judge.reference import ReferenceReport
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"


class StandInPool:
    """Answers like a judge pool; judging the named problems raises, as a broken judge would."""

    def __init__(self, failing: set[str] = frozenset()):
        self.failing, self.judged = failing, []

    async def check_reference(self, task):
        stats = TimingStats.from_samples([1.0, 1.2, 1.1], [])
        return ReferenceReport(task.name, task.sha256, "cpu", deterministic=True, self_max_abs_diff=0.0,
                               eager=stats, compile=stats)

    async def evaluate(self, task, solution, stage):
        if task.name in self.failing:
            raise RuntimeError("the judge's process pool broke")
        self.judged.append(task.name)
        verdict = Verdict(status="ok", correct=True, reward=3, speedup_vs_eager=2.0, speedup_vs_compile=1.5,
                          task=task.name, backend="cpu", stage="profile")
        verdict.seconds = {"total": 0.1}
        return verdict


def test_a_failing_judge_job_is_not_recorded_and_a_rerun_retries_it(tmp_path):
    problems = discover(FIXTURE, [1], {1, 2})
    solutions = tmp_path / "solutions"
    shutil.copytree(FIXTURE / "solutions", solutions)
    candidates, _ = find_candidates(solutions, problems[1])
    run = BenchRun(tmp_path / "out", problems, candidates, solutions_root=solutions)

    with pytest.raises(BenchmarkError, match=r"(?s)failed on 1 job.*2_Softsign.*process pool broke"):
        asyncio.run(run.run([StandInPool({"2_Softsign"})], jobs_per_pool=2))
    keys = sorted(r["key"] for r in ResultsLog(tmp_path / "out" / RESULTS_FILE).read())
    assert keys == ["level1/1_Scale_Shift.py#reference", "level1/1_Scale_Shift.py#solution",
                    "level1/2_Softsign.py#reference"]

    pool = StandInPool()
    asyncio.run(run.run([pool], jobs_per_pool=2))
    assert pool.judged == ["2_Softsign"]
    assert run.jobs() == ([], [])
