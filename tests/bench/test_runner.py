"""The run's bookkeeping with a stand-in judge pool: a failing judge job is retried on rerun."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from cuda_agent.bench.assemble import problem_records
from cuda_agent.bench.kb_timing import export_baselines
from cuda_agent.bench.kernelbench import discover
from cuda_agent.bench.benchmark import BenchOptions, _check_run_settings, run_benchmark
from cuda_agent.bench.runner import RESULTS_FILE, BenchRun, ResultsLog
from cuda_agent.bench.solutions import find_candidates
from cuda_agent.errors import BenchmarkError
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.reference import ReferenceReport
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"


class StandInPool:
    """Answers like a judge pool; judging the named problems raises, as a broken judge would."""

    def __init__(self, failing: set[str] = frozenset(), slow_reference: str = ""):
        self.failing, self.judged, self.events = failing, [], []
        self.slow_reference = slow_reference

    async def check_reference(self, task):
        await asyncio.sleep(0.2 if task.name == self.slow_reference else 0.0)
        self.events.append(("checked", task.name))
        stats = TimingStats.from_samples([1.0, 1.2, 1.1], [])
        return ReferenceReport(task.name, task.sha256, "cpu", deterministic=True, self_max_abs_diff=0.0,
                               eager=stats, compile=stats)

    async def evaluate(self, task, solution, stage):
        if task.name in self.failing:
            raise RuntimeError("the judge's process pool broke")
        self.judged.append(task.name)
        self.events.append(("judged", task.name))
        verdict = Verdict(status="ok", correct=True, reward=3, speedup_vs_eager=2.0, speedup_vs_compile=1.5,
                          task=task.name, backend="cpu", stage="profile")
        verdict.timings = {"candidate": TimingStats.from_samples([0.5] * 3, []),
                           "eager": TimingStats.from_samples([1.0] * 3, []),
                           "compile": TimingStats.from_samples([0.75] * 3, [])}
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
    scored, _ = problem_records(run, min_baseline_ms=0.1)
    assert [(r["name"], r["status"]) for r in scored] == [("1_Scale_Shift.py", "ok"), ("2_Softsign.py", "not_judged")]
    keys = sorted(r["key"] for r in ResultsLog(tmp_path / "out" / RESULTS_FILE).read())
    assert keys == ["level1/1_Scale_Shift.py#reference", "level1/1_Scale_Shift.py#solution",
                    "level1/2_Softsign.py#reference"]

    pool = StandInPool()
    asyncio.run(run.run([pool], jobs_per_pool=2))
    assert pool.judged == ["2_Softsign"]
    assert run.jobs() == ([], [])


def _options(tmp_path, **kw) -> BenchOptions:
    return BenchOptions(kernelbench=FIXTURE, out=tmp_path / "out", levels=[1], problem_ids={1, 2},
                        solutions=FIXTURE / "solutions", label="stand-in", **kw)


def test_report_only_rescores_against_imported_baselines_and_flags_a_stale_one(tmp_path):
    problems = discover(FIXTURE, [1], {1, 2})
    candidates, _ = find_candidates(FIXTURE / "solutions", problems[1])
    asyncio.run(BenchRun(tmp_path / "out", problems, candidates, solutions_root=FIXTURE / "solutions")
                .run([StandInPool()], jobs_per_pool=1))
    # KernelBench-layout baselines: problem 1 agrees with the measured eager time (about 1.1 ms),
    # problem 2's is 10x off, as a file made for an older version of a problem would be.
    stats = {"mean_ms": 1.0, "std_ms": 0.0, "min_ms": 1.0, "max_ms": 1.0, "calls": 100}
    export_baselines(tmp_path / "hw", [{"level": 1, "name": "1_Scale_Shift.py", "eager": stats, "compile": stats},
                                       {"level": 1, "name": "2_Softsign.py", "eager": {**stats, "mean_ms": 11.0},
                                        "compile": stats}], "GPU")
    report, _ = run_benchmark(_options(tmp_path, judge=JudgeConfig(backend="cuda"), report_only=True,
                                       import_baselines=tmp_path / "hw"))
    first, second = report["problems"]
    assert first["speedup_vs_eager"] == pytest.approx(1.0 / 0.5) and first["measured_speedup_vs_eager"] == 2.0
    assert first["eager_ms"] == 1.0 and first["flags"] == []
    assert second["speedup_vs_eager"] == pytest.approx(11.0 / 0.5)
    assert second["flags"] == ["imported_baseline_mismatch"]
    assert "imported from" in report["settings"]["baselines"] and report["settings"]["backend"] == "cuda"


def test_a_run_folder_refuses_results_judged_with_other_settings(tmp_path):
    _check_run_settings(tmp_path, "cpu", JudgeConfig())
    _check_run_settings(tmp_path, "cpu", JudgeConfig())  # the same: resumes
    with pytest.raises(BenchmarkError, match=r"other settings \(atol, backend differ\)"):
        _check_run_settings(tmp_path, "cuda", JudgeConfig(atol=1e-3))


def test_candidates_wait_for_their_problems_reference_check(tmp_path):
    # Problem 2's check is slow; a free worker takes problem 2's candidate meanwhile and must wait.
    problems = discover(FIXTURE, [1], {1, 2})
    candidates, _ = find_candidates(FIXTURE / "solutions", problems[1])
    pool = StandInPool(slow_reference="2_Softsign")
    asyncio.run(BenchRun(tmp_path / "out", problems, candidates).run([pool], jobs_per_pool=2))
    events = pool.events
    assert events.index(("checked", "2_Softsign")) < events.index(("judged", "2_Softsign"))
    assert events.index(("checked", "1_Scale_Shift")) < events.index(("judged", "1_Scale_Shift"))
