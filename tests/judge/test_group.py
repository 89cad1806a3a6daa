"""Group judging (``Judge.evaluate_many``): the candidates of one task against one reference run,
each given the verdict it would get alone."""

from __future__ import annotations

import pytest

from cuda_agent.judge import run_verify
from cuda_agent.task import task_from_source

pytestmark = pytest.mark.slow

MIXED = ["cpu/correct", "cpu/wrong_values", "cpu/compile_error", "cpu/segfault", "cpu/wrong_shape"]


def test_a_group_gets_the_verdicts_each_would_get_alone(cpu_judge, task, fixture_solution):
    solutions = [fixture_solution(n) for n in MIXED]
    group = cpu_judge.evaluate_many(task, solutions, "verify")
    alone = [cpu_judge.verify(task, s) for s in solutions]
    assert [v.status for v in group] == [v.status for v in alone]
    assert [v.status for v in group] == ["ok", "incorrect", "compile_error", "runtime_error", "incorrect"]
    assert [v.solution_sha256 for v in group] == [s.sha256 for s in solutions]
    assert group[0].correct and group[0].reward == 1 and len(group[0].checks) == cpu_judge.config.num_checks
    assert group[1].error.split(":")[0] == alone[1].error.split(":")[0]  # the same failure, on other seeds
    assert "SIGSEGV" in group[3].error
    assert all(v.reward == -1 for v in group[1:])


def test_each_check_is_drawn_once_for_the_whole_group(cpu_judge, task, fixture_solution, monkeypatch):
    drawn, checked = [], []
    draw_check, check_candidate = run_verify.RunVerification.draw_check, run_verify.RunVerification.check_candidate

    def counted_draw(self, index, buffers=None):
        drawn.append(index)
        return draw_check(self, index, buffers)

    def seen_check(self, draw):
        checked.append((draw.index, draw.input_seed, draw.weight_seed, self.run.buffer))
        return check_candidate(self, draw)

    monkeypatch.setattr(run_verify.RunVerification, "draw_check", counted_draw)
    monkeypatch.setattr(run_verify.RunVerification, "check_candidate", seen_check)
    verdicts = cpu_judge.evaluate_many(task, [fixture_solution("cpu/correct")] * 3, "verify")
    assert [v.status for v in verdicts] == ["ok"] * 3
    checks = cpu_judge.config.num_checks
    assert drawn == list(range(checks))  # one reference forward per check, not one per candidate
    assert len(checked) == 3 * checks
    for index in range(checks):
        seen = [c for c in checked if c[0] == index]
        assert len({c[1:3] for c in seen}) == 1  # every candidate on the same seeds and weights
        assert sorted(c[3] for c in seen) == ["0", "1", "2"]  # each with its own place (exchange buffer)
    assert len({tuple(c[1] for c in checked if c[0] == i)[0] for i in range(checks)}) == checks  # fresh per check


def test_a_reference_that_fails_fails_every_candidate_as_the_tasks_fault(cpu_judge, task, fixture_solution):
    broken = task_from_source(task.source.replace("return torch.relu(x * self.scale + self.bias)",
                                                  "raise RuntimeError('no such op')"), "broken_reference", "broken.py")
    verdicts = cpu_judge.evaluate_many(broken, [fixture_solution("cpu/correct"), fixture_solution("cpu/compile_error"),
                                                fixture_solution("cpu/correct")], "verify")
    assert [v.status for v in verdicts] == ["runtime_error", "compile_error", "runtime_error"]
    for v in (verdicts[0], verdicts[2]):
        assert v.settings["fault"] == "task" and "reference" in v.error and "no such op" in v.error
        assert v.reward == -1


def test_the_groups_correct_candidates_are_profiled_and_paid(cpu_judge, task, fixture_solution):
    verdicts = cpu_judge.evaluate_many(task, [fixture_solution("cpu/correct"), fixture_solution("cpu/wrong_values"),
                                              fixture_solution("cpu/correct")], "profile")
    assert [v.status for v in verdicts] == ["ok", "incorrect", "ok"]
    for v in (verdicts[0], verdicts[2]):
        assert v.correct and v.reward >= 1 and v.timings["candidate"].median_ms > 0
        assert v.timings["eager"].median_ms > 0 and v.timings["compile"].median_ms > 0
        assert "reference-eager" in v.isolation and v.seconds["timing"] > 0
    assert verdicts[1].reward == -1 and verdicts[1].timings.get("candidate") is None


def test_an_empty_group_a_compile_only_group_and_a_bad_stage(cpu_judge, task, fixture_solution):
    assert cpu_judge.evaluate_many(task, [], "profile") == []
    verdicts = cpu_judge.evaluate_many(task, [fixture_solution("cpu/correct"), fixture_solution("cpu/compile_error")],
                                       "compile")
    assert [v.status for v in verdicts] == ["ok", "compile_error"]
    assert "start" not in verdicts[0].seconds  # nothing was started
    with pytest.raises(ValueError, match="stage"):
        cpu_judge.evaluate_many(task, [], "everything")
