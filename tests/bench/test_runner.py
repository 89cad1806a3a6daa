"""The run's bookkeeping with a stand-in judge pool: a failing judge job is retried on rerun."""

from __future__ import annotations

import asyncio
import io
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from cuda_agent.bench.assemble import problem_records
from cuda_agent.bench.kb_timing import export_baselines
from cuda_agent.bench.kernelbench import discover
from cuda_agent.bench import benchmark
from cuda_agent.bench.benchmark import BenchOptions, _check_run_settings, run_benchmark
from cuda_agent import cluster
from cuda_agent.bench.progress import BenchProgress
from cuda_agent.bench.runner import RESULTS_FILE, BenchRun, ResultsLog, no_speedup_reason
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

    def close(self):
        pass


class TalkingPool(StandInPool):
    """A stand-in that carries progress messages, as a LocalJudgePool does: each run
    says what the judge would, and the line the run is shown on is read back after each."""

    relays_progress = True

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def _say(self, progress, messages):
        for message in messages:
            progress(message)
            self.seen.append(progress.describe())

    async def check_reference(self, task, progress=None):
        self._say(progress, ["starting reference processes", "timing eager"])
        return await super().check_reference(task)

    async def evaluate(self, task, solution, stage, progress=None):
        self._say(progress, ["checking the solution's format", "building the extension", "check 1/3",
                             "timing candidate and reference"])
        return await super().evaluate(task, solution, stage)


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


def test_each_job_in_flight_names_its_problem_and_the_judges_stage(tmp_path):
    problems = discover(FIXTURE, [1], {1})
    candidates, _ = find_candidates(FIXTURE / "solutions", problems[1])
    pool = TalkingPool()
    asyncio.run(BenchRun(tmp_path / "out", problems, candidates).run([pool], jobs_per_pool=1))
    assert pool.seen == [
        "  baselines of level 1 problem 1_Scale_Shift.py: verifying (starting reference processes)",
        "  baselines of level 1 problem 1_Scale_Shift.py: timing (timing eager)",
        "  level 1 problem 1_Scale_Shift.py, its solution: building (checking the solution's format)",
        "  level 1 problem 1_Scale_Shift.py, its solution: building (building the extension)",
        "  level 1 problem 1_Scale_Shift.py, its solution: verifying (check 1/3)",
        "  level 1 problem 1_Scale_Shift.py, its solution: timing (timing candidate and reference)"]


def test_the_run_lines_count_jobs_and_drop_a_finished_one():
    view = BenchProgress(None, total=2)
    line = view.start("baselines of level 1 problem 3_X.py")
    assert view.lines() == ["[bold]judging 0/2[/]", "  baselines of level 1 problem 3_X.py: starting"]
    line("running the reference")  # the bench's own words, before the judge names a stage
    assert view.lines()[1] == "  baselines of level 1 problem 3_X.py: running the reference"
    line("timing eager")
    assert view.lines()[1] == "  baselines of level 1 problem 3_X.py: timing (timing eager)"
    view.finish(line, "ok")
    assert view.lines() == ["[bold]judging 1/2[/]; last: baselines of level 1 problem 3_X.py: ok"]


def test_a_cpu_run_says_what_kernelbench_sizes_cost_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "make_pool", lambda kind, config, jobs, *rest: StandInPool())
    console = Console(file=io.StringIO(), width=400)
    options = BenchOptions(kernelbench=FIXTURE, out=tmp_path / "out", levels=[1], problem_ids={1}, label="cpu",
                           judge=JudgeConfig(backend="cpu"), baselines_only=True)
    run_benchmark(options, console=console)
    said = console.file.getvalue()
    assert "KernelBench's inputs are sized for GPUs" in said and "1 problem(s) have baselines" in said
    assert "--levels" in said and "--problems" in said and "quarter of an hour" in said
    assert said.index("sized for GPUs") < said.index("judging")  # before the long work

    # Another problem later in the same folder: the estimate is the checks recorded there.
    console.file = io.StringIO()
    run_benchmark(replace(options, problem_ids={1, 2}), console=console)
    said = console.file.getvalue()
    assert "1 problem(s) have baselines" in said and "the 1 reference(s) already checked here took" in said

    console.file = io.StringIO()  # nothing left to check: nothing to warn of
    run_benchmark(replace(options, problem_ids={1, 2}), console=console)
    assert "sized for GPUs" not in console.file.getvalue()


def test_a_cuda_run_is_not_warned_about_cpu_times(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "make_pool", lambda kind, config, jobs, *rest: StandInPool())
    monkeypatch.setattr(benchmark, "visible_gpus", lambda backend: 1)
    monkeypatch.setattr("cuda_agent.device.resolve_backend", lambda backend: backend)
    console = Console(file=io.StringIO(), width=400)
    run_benchmark(BenchOptions(kernelbench=FIXTURE, out=tmp_path / "out", levels=[1], problem_ids={1},
                               judge=JudgeConfig(backend="cuda"), baselines_only=True), console=console)
    assert "sized for GPUs" not in console.file.getvalue()


DRIFT = ("the reference took 0.11x its eager baseline while the candidate was timed: the machine was not in "
         "the state the baseline was measured in")


def test_imported_baselines_pay_no_speedup_the_judge_withheld():
    from cuda_agent.bench.assemble import _rebased

    imported = {"eager": {"level1/1_X.py": {"mean": 10.0}}, "compile": {"level1/1_X.py": {"mean": 8.0}}}
    paid = {"correct": True, "candidate_ms": 2.0, "speedup_vs_eager": 1.5, "speedup_vs_compile": 1.2}
    assert _rebased(paid, imported, "level1/1_X.py")["speedup_vs_eager"] == 5.0
    withheld = {"correct": True, "candidate_ms": 2.0, "speedup_vs_eager": None, "speedup_vs_compile": None,
                "no_speedup": "no speed-up: computed in less precision than the task's float32"}
    rebased = _rebased(withheld, imported, "level1/1_X.py")
    assert rebased["speedup_vs_eager"] is None and rebased["speedup_vs_compile"] is None
    assert rebased["no_speedup"] == withheld["no_speedup"]


def test_why_a_correct_verdict_has_no_speedup_is_its_cause():
    unstable = {"correct": True, "speedup_vs_eager": None,
                "speedup_withheld": "the timing was not stable enough to claim a speedup",
                "notes": [f"no speedup is claimed: {DRIFT}", "an unrelated note"]}
    assert no_speedup_reason(unstable) == f"no speed-up: {DRIFT}"
    precision = {"correct": True, "speedup_withheld": "computed in less precision than the task's float32, so no "
                                                     "speedup is paid"}
    assert no_speedup_reason(precision) == f"no speed-up: {precision['speedup_withheld']}"
    assert no_speedup_reason({"correct": True}) == "no speed-up: the candidate was not timed"
    assert no_speedup_reason({"correct": True, "speedup_vs_eager": 1.2}) is None
    assert no_speedup_reason({"correct": True, "speedup_vs_eager": 1.2, "compile_speedup_withheld": "it moved"}) == \
        "no speed-up vs torch.compile: it moved"
    assert no_speedup_reason({"correct": False, "notes": [f"no speedup is claimed: {DRIFT}"]}) is None


class UnsteadyPool(StandInPool):
    """Judges every solution correct, with its speed-up withheld for a drifting reference."""

    async def evaluate(self, task, solution, stage):
        verdict = await super().evaluate(task, solution, stage)
        verdict.speedup_vs_eager = verdict.speedup_vs_compile = None
        verdict.speedup_withheld = "the timing was not stable enough to claim a speedup"
        verdict.notes = [f"no speedup is claimed: {DRIFT}"]
        return verdict


def test_the_report_row_and_terminal_say_why_a_correct_result_has_no_speedup(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "make_pool", lambda kind, config, jobs, *rest: UnsteadyPool())
    console = Console(file=io.StringIO(), width=400)
    report, written = run_benchmark(_options(tmp_path, judge=JudgeConfig(backend="cpu")), console=console)
    first = report["problems"][0]
    assert first["correct"] and first["no_speedup"] == f"no speed-up: {DRIFT}"
    row = next(line for line in written["markdown"].read_text().splitlines() if line.startswith("| 1 | 1 |"))
    assert row.endswith(f"| ok | - | - | - |  | no speed-up: {DRIFT} |")
    said = console.file.getvalue()
    assert "Correct, without a speed-up" in said and "0.11x its eager baseline" in said

    # A result recorded before the reason was: the report reads it from the verdict.
    log = ResultsLog(tmp_path / "out" / RESULTS_FILE)
    records = log.read()
    log.path.write_text("")
    for record in records:
        record.pop("no_speedup", None)
        log.append({k: v for k, v in record.items() if k != "version"})
    rebuilt, _ = run_benchmark(_options(tmp_path, judge=JudgeConfig(backend="cpu"), report_only=True))
    assert rebuilt["problems"][0]["no_speedup"] == f"no speed-up: {DRIFT}"
