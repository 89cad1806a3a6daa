"""Judging a task over its workloads: held-out sizes refuse a kernel hard-wired to the ones it saw,
each workload's tolerance holds, and the reward comes from the geometric means."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from cuda_agent.judge.over_workloads import combine, geometric_mean
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task, task_from_source
from cuda_agent.workloads import Workload, parse_plan

KERNEL = Path("kernels") / "scale_bias_relu.cpp"
ROWS_LOOP = "for (int64_t r = 0; r < rows; ++r)"


@pytest.fixture(scope="module")
def task(fixtures_dir):
    return load_task(fixtures_dir / "workload_tasks" / "scale_bias_relu.py")


def edited(tmp_path: Path, fixtures_dir: Path, old: str, new: str) -> object:
    """The correct CPU solution with one edit to its kernel."""
    root = tmp_path / "solution"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    source = (root / KERNEL).read_text()
    assert old in source
    (root / KERNEL).write_text(source.replace(old, new))
    return load_solution(root)


# -- one verdict from the workloads' verdicts ------------------------------------------------------
def timed(eager: float, compile_: float, withheld: str | None = None, sol: float | None = None) -> Verdict:
    v = Verdict(status="ok", correct=True, stage="profile", speedup_vs_eager=eager, speedup_vs_compile=compile_,
                speedup_withheld=withheld, sol_score={"eager": sol, "compile": sol})
    v.timings["candidate"] = TimingStats(1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 10)
    v.seconds["total"] = 2.0
    return v


PLAN = parse_plan({"workloads": [{"name": "a", "axes": {"n": 8}}, {"name": "b", "axes": {"n": 16}}],
                   "varying": ["n"], "defaults": {"n": 8}}, "t.py")
A, B = PLAN.workloads
HIDDEN = Workload("held-out-1", {"n": 11}, held_out=True)


def test_the_reward_comes_from_the_geometric_means_of_the_declared_workloads(task):
    checked = Verdict(status="ok", correct=True, stage="verify")
    out = combine(task, PLAN, [(HIDDEN, checked), (A, timed(4.0, 1.5, sol=0.2)), (B, timed(0.25, 0.9, sol=0.4))],
                  "profile", 0.05)
    assert out.speedup_vs_eager == pytest.approx(1.0) and out.speedup_vs_compile == pytest.approx(math.sqrt(1.35))
    assert out.reward == 1  # 4x and 0.25x: no faster than eager over both
    assert out.reward_continuous == pytest.approx(math.sqrt(1.35))
    # SOL: the mean share of the gap to the device's limit closed (0.2 and 0.4); none without a roofline.
    assert out.sol_score == {"eager": pytest.approx(0.3), "compile": pytest.approx(0.3)}
    assert out.reward_sol == pytest.approx(0.3)
    assert [w["name"] for w in out.workloads] == ["held-out-1", "a", "b"]
    assert out.workloads[0]["held_out"] and out.workloads[0]["stage"] == "verify"
    assert out.seconds["total"] == pytest.approx(4.0) and out.task == task.name
    assert "geometric mean over the declared workloads: eager 1.00x" in out.feedback
    out = combine(task, PLAN, [(A, timed(2.0, 1.2)), (B, timed(1.5, 1.1))], "profile", 0.05)
    assert out.reward == 3 and out.sol_score == {"eager": None, "compile": None} and out.reward_sol == 0.0


def test_a_speedup_withheld_at_one_workload_is_withheld_for_all(task):
    out = combine(task, PLAN, [(A, timed(3.0, 2.0)), (B, timed(None, None, "the timing was not stable"))],
                  "profile", 0.05)
    assert out.speedup_vs_eager is None and out.reward == 1 and out.reward_continuous == -1
    assert out.speedup_withheld == "b: the timing was not stable"


def test_the_first_failing_workload_is_the_verdict_and_is_named(task):
    wrong = Verdict(status="incorrect", stage="verify", error="output: 3 values outside atol", feedback="incorrect")
    out = combine(task, PLAN, [(HIDDEN, wrong)], "profile", 0.05)
    assert out.status == "incorrect" and out.reward == -1
    assert out.error == "held-out workload held-out-1 (n=11): output: 3 values outside atol"
    assert out.feedback.startswith("on held-out workload held-out-1 (n=11) (a size the task did not show: the "
                                   "kernel must handle other values of n):")


def test_geometric_mean_needs_every_value():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([2.0, None]) is None and geometric_mean([]) is None and geometric_mean([0.0]) is None


# -- judged ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_general_kernel_is_correct_on_every_workload_held_out_ones_included(cpu_judge, task, fixture_solution):
    verdict = cpu_judge.evaluate(task, fixture_solution("cpu/correct"), stage="verify")
    assert verdict.status == "ok" and verdict.correct and verdict.reward == 1, verdict.error
    names = [w["name"] for w in verdict.workloads]
    assert names == ["held-out-1", "held-out-2", "square", "tall"]
    assert all(w["status"] == "ok" and w["stage"] == "verify" for w in verdict.workloads)
    held = [w["axes"]["batch_size"] for w in verdict.workloads if w["held_out"]]
    assert all(size not in (256, 512) for size in held)
    assert "correct on all 4 workloads (2 held out, checked only)" in verdict.feedback


@pytest.mark.slow
def test_a_kernel_hard_wired_to_the_shown_sizes_fails_on_a_held_out_one(cpu_judge, task, fixtures_dir, tmp_path):
    # Rows in tiles of 64 with no bounds check: right at 256 and 512 rows, wrong at any odd count.
    tiled = edited(tmp_path, fixtures_dir, ROWS_LOOP, "for (int64_t r = 0; r < (rows / 64) * 64; ++r)")
    verdict = cpu_judge.evaluate(task, tiled, stage="verify")
    assert verdict.status == "incorrect" and verdict.reward == -1
    assert verdict.error.startswith("held-out workload held-out-1 (batch_size=")
    assert "the kernel must handle other values of batch_size" in verdict.feedback
    assert [w["name"] for w in verdict.workloads] == ["held-out-1"]  # nothing judged after the first failure
    # Shown only the declared sizes, it passes: what held-out workloads are for.
    declared = task_from_source(task.source.replace('VARYING_AXES = ("batch_size",)', "VARYING_AXES = ()"),
                                task.name, task.origin)
    assert cpu_judge.evaluate(declared, tiled, stage="verify").status == "ok"


@pytest.mark.slow
def test_each_workload_is_checked_to_its_own_tolerance(cpu_judge, task, fixtures_dir, tmp_path):
    # 1.5% off wherever a row has 64 features (the "tall" workload): within its tolerances of 2%,
    # not within the judge's 1%.
    off = edited(tmp_path, fixtures_dir, "yr[c] = v > 0.0f ? v : 0.0f;",
                 "yr[c] = (v > 0.0f ? v : 0.0f) * (cols == 64 ? 1.015f : 1.0f);")
    verdict = cpu_judge.evaluate(task, off, stage="verify")
    assert verdict.status == "ok", verdict.error
    assert next(w for w in verdict.workloads if w["name"] == "tall")["atol"] == 0.02
    strict = task_from_source(task.source.replace(', "atol": 2e-2, "rtol": 2e-2', ""), task.name, task.origin)
    verdict = cpu_judge.evaluate(strict, off, stage="verify")
    # Held to 1% at 64 features (tall, or a held-out workload drawn from it, which takes its tolerance).
    assert verdict.status == "incorrect" and "features=64)" in verdict.error and "atol=0.01" in verdict.error


@pytest.mark.slow
def test_a_group_is_judged_over_the_same_held_out_workloads(cpu_judge, task, fixtures_dir, tmp_path,
                                                             fixture_solution):
    tiled = edited(tmp_path, fixtures_dir, ROWS_LOOP, "for (int64_t r = 0; r < (rows / 64) * 64; ++r)")
    good, bad = cpu_judge.evaluate_many(task, [fixture_solution("cpu/correct"), tiled], stage="verify")
    assert good.status == "ok" and bad.status == "incorrect"
    assert good.workloads[0]["axes"] == bad.workloads[0]["axes"]


@pytest.mark.slow
@pytest.mark.timing  # its profile must not be refused: a loaded machine can doubt an honest clock
def test_a_profile_over_workloads_pays_the_geometric_mean(cpu_judge, task, fixture_solution):
    verdict = cpu_judge.evaluate(task, fixture_solution("cpu/correct"), stage="profile")
    assert verdict.status == "ok", verdict.error
    declared = [w for w in verdict.workloads if not w["held_out"]]
    assert [w["stage"] for w in declared] == ["profile", "profile"]
    if verdict.speedup_withheld is None:
        assert verdict.speedup_vs_eager == pytest.approx(geometric_mean([w["speedup_vs_eager"] for w in declared]))
    assert all(w["candidate_ms"] and w["eager_ms"] for w in declared)
    assert "geometric mean over the declared workloads" in verdict.feedback or "no speedup is paid" in verdict.feedback


@pytest.mark.slow
def test_a_sol_execbench_problem_is_judged_over_its_workloads(cpu_judge, fixtures_dir, fixture_solution):
    task = load_task(fixtures_dir / "sol_execbench" / "rmsnorm_h64")
    verdict = cpu_judge.evaluate(task, fixture_solution("cpu/sol_rmsnorm"), stage="verify")
    assert verdict.status == "ok" and verdict.correct, verdict.error
    declared = [w for w in verdict.workloads if not w["held_out"]]
    assert [w["name"] for w in declared] == ["rms-b7", "rms-b1", "rms-b16"]
    assert (declared[1]["atol"], declared[1]["rtol"]) == (1e-05, 1e-04)  # workload.jsonl's own tolerance
    assert all(w["axes"]["batch_size"] not in (1, 7, 16) for w in verdict.workloads if w["held_out"])


def test_a_failure_at_a_size_the_judge_drew_that_is_the_tasks_is_passed_over(task):
    reference_failed = Verdict(status="runtime_error", stage="verify", error="the reference raised",
                               settings={"fault": "task"})
    out = combine(task, PLAN, [(HIDDEN, reference_failed), (A, timed(2.0, 1.2)), (B, timed(1.5, 1.1))],
                  "profile", 0.05)
    assert out.status == "ok" and out.reward == 3
    assert any("held-out-1 (n=11) was passed over: the task's reference failed there" in n for n in out.notes)
    assert out.feedback.startswith("correct on all 2 workloads (0 held out, checked only)")


def test_a_failure_that_no_workload_causes_is_said_as_it_is(task):
    broken = Verdict(status="compile_error", stage="compile", error="kernels/a.cpp:3: error", feedback="compile error")
    out = combine(task, PLAN, [(HIDDEN, broken)], "profile", 0.05)
    assert out.error == "kernels/a.cpp:3: error" and out.feedback == "compile error"


class ReferenceBesideCandidate:
    """A judge whose task reference fails at every held-out size when run beside the candidate,
    and runs (or not: ``fails_alone``) when checked alone."""

    def __init__(self, fails_alone: bool):
        import random

        from cuda_agent.judge.config import JudgeConfig

        self.fails_alone, self.config, self._rng = fails_alone, JudgeConfig(backend="cpu"), random.Random(0)
        self.checked_alone: list[str] = []

    def progress(self, message):
        pass

    def evaluate(self, task, solution, stage):
        if "held-out" in task.metadata["workload"]["name"]:
            return Verdict(status="runtime_error", stage=stage, error="the reference (reference-eager) failed: OOM",
                           settings={"fault": "task"}, notes=["this failure is the task's, not the candidate's"],
                           feedback="runtime error\nnote: this failure is the task's, not the candidate's")
        return timed(2.0, 1.2)

    def check_reference(self, task):
        from cuda_agent.judge.reference import ReferenceReport

        self.checked_alone.append(task.metadata["workload"]["name"])
        return ReferenceReport(task=task.name, task_sha256=task.sha256, backend="cpu", ok=not self.fails_alone)


@pytest.mark.parametrize("fails_alone", [True, False])
def test_a_held_out_size_is_passed_over_only_where_the_reference_fails_alone_too(task, fails_alone):
    # A candidate that makes the reference beside it fail (taking the device's memory, say) must not
    # skip the sizes that catch a kernel hard-wired to the ones it saw.
    from cuda_agent.judge.over_workloads import judge_over_workloads

    judge = ReferenceBesideCandidate(fails_alone)
    (out,) = judge_over_workloads(judge, task, [object()], "profile")
    assert judge.checked_alone and all(name.startswith("held-out") for name in judge.checked_alone)
    if fails_alone:
        assert out.status == "ok" and out.reward == 3
        assert sum("was passed over: the task's reference failed there" in n for n in out.notes) == 2
    else:
        assert out.status == "runtime_error" and out.reward == -1 and out.settings["fault"] == "candidate"
        assert out.error.startswith("held-out workload held-out-1")
        assert "only beside the candidate; alone, it ran" in out.feedback
        assert "not the candidate's" not in out.feedback
