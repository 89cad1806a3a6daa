"""The terminal views: the judge's progress line and the verdict panel."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cuda_agent.judge.judge import Judge
from cuda_agent.render import JudgeProgress, judge_stage, verdict_panel


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=80, force_terminal=False), buffer


@pytest.mark.slow
def test_every_message_of_a_real_judge_names_its_stage(judge_config, task, fixture_solution):
    # The messages a whole judge sends, in order: each belongs to the stage its work is in, and
    # the stages come in order, each reached.
    messages: list[str] = []
    verdict = Judge(judge_config(), progress=messages.append).judge(task, fixture_solution("cpu/correct"))
    assert verdict.status == "ok", verdict.feedback
    stages, last = [], ""
    for message in messages:
        last = judge_stage(message, last)
        assert last, f"no stage for the first message {message!r}"
        if not stages or stages[-1] != last:
            stages.append(last)
    assert stages == ["build", "verify", "time"], messages


def test_the_progress_line_counts_only_the_stages_asked_for():
    console, _ = _console()
    with JudgeProgress(console, "verify") as progress:
        progress("building the extension")
        assert progress._describe("x") == "stage 1/2 (build): x"
        progress("check 2/5")
        assert progress.stage == "verify" and progress.stages == ["build", "verify"]
        progress("a message no stage names")  # stays in the stage it is in
        assert progress._describe("y") == "stage 2/2 (verify): y"


@pytest.mark.slow
def test_the_panel_keeps_each_stages_seconds_whole_at_80_columns(cpu_judge, task, fixture_solution):
    verdict = cpu_judge.verify(task, fixture_solution("cpu/correct"))
    console, buffer = _console()
    console.print(verdict_panel(verdict))
    text = " ".join(line.strip("│ ") for line in buffer.getvalue().splitlines())
    for stage, seconds in verdict.seconds.items():
        assert f"{stage} {seconds:.1f} s" in text, (stage, text)
