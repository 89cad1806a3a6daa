"""The terminal views: the judge's progress line and the verdict panel."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from cuda_agent.judge.baselines import baseline_stats
from cuda_agent.judge.correctness import CheckResult
from cuda_agent.judge.judge import Judge
from cuda_agent.judge.timing import TimingStats
from cuda_agent.judge.verdict import Verdict, compile_speedup_withheld, render_feedback, speedup_withheld
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


def _printed(verdict: Verdict, width: int = 80) -> str:
    """What the panel shows at ``width`` columns, with every space and line break taken out: a
    figure that is only wrapped is still there, whole; a cut one is not."""
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(verdict_panel(verdict))
    return "".join(console.export_text().replace("│", " ").split())


def _shown(text: str, printed: str) -> bool:
    return "".join(text.split()) in printed


def _profiled() -> Verdict:
    """A profiled verdict as the reported 2-core machine gave it: eager's sessions far apart."""
    eager = baseline_stats([TimingStats.from_samples([m] * 20) for m in (3590.0, 1827.0)], 0.08, 2, 0.03)
    compile_ = baseline_stats([TimingStats.from_samples([174.7] * 20)], 0.08, 1, 0.03)
    v = Verdict(status="ok", correct=True, stage="profile", backend="cpu",
                task="level3/44_MiniGPTBlock_with_a_name_longer_than_any_border_of_eighty_columns",
                device={"name": "AMD EPYC 9654 96-Core Processor, 2 of its cores, in a virtual machine"},
                timings={"candidate": TimingStats.from_samples([149.5] * 20), "eager": eager, "compile": compile_},
                checks=[CheckResult(index=0, passed=True, max_abs_error=2.4e-7, max_rel_error=1.65e5,
                                    norm_rel_error=3.1e-7)],
                seconds={"static_checks": 0.4, "build": 12.3, "verify": 117.25, "profile": 212.5, "total": 342.5})
    v.speedup_withheld = speedup_withheld(v)
    v.reward = 1
    v.feedback = render_feedback(v)
    return v


def test_the_panel_keeps_every_figure_whole_at_80_columns():
    v = _profiled()
    printed = _printed(v)
    for text in (v.task, f"cpu · {v.device['name']}", "149.5 ms", "3590 ms", "174.7 ms", "2.4e-07", "3.1e-07",
                 "measured, unsettled", "verify 117.2 s", "total 342.5 s"):
        assert _shown(text, printed), text
    for stats in v.timings.values():
        assert _shown(f"{stats.spread * 100:.1f}%", printed)


def test_the_panel_says_in_a_line_of_its_own_why_no_speedup_is_claimed():
    v = _profiled()
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(verdict_panel(v))
    lines = [line.strip("│ ") for line in console.export_text().splitlines()]
    head = lines.index("ok   reward 1")  # no speedups beside it: none is paid
    assert lines[head + 1].startswith("no speedup claimed: the eager baseline is unsettled: its median moved"), lines
    assert _shown(f"no speedup claimed: {v.speedup_withheld}", _printed(v))


def test_the_panel_says_why_only_the_speedup_over_compile_is_not_claimed():
    v = _profiled()
    v.timings["eager"] = baseline_stats([TimingStats.from_samples([3590.0] * 20)], 0.08, 1, 0.03)
    v.timings["compile"] = baseline_stats([TimingStats.from_samples([m] * 20) for m in (170.0, 260.0)], 0.08, 2, 0.03)
    v.speedup_withheld, v.compile_speedup_withheld = speedup_withheld(v), compile_speedup_withheld(v)
    assert v.speedup_withheld is None
    assert _shown(f"no speedup over torch.compile claimed: {v.compile_speedup_withheld}", _printed(v))


def test_a_passing_check_shows_no_relative_error_that_alarms():
    # 1.65e+05 is the relative error where the reference is near zero: a passing check shows its
    # error relative to the output's magnitude instead; a failing one shows both.
    v = _profiled()
    v.checks.append(CheckResult(index=1, passed=False, max_abs_error=0.5, max_rel_error=2.5, norm_rel_error=0.4))
    printed = _printed(v)
    assert "1.65e+05" not in printed and "3.1e-07" in printed
    assert "2.5" in printed and "0.4" in printed


def test_a_compile_only_verdict_shows_no_reward():
    built = Verdict(status="ok", stage="compile", backend="cpu", feedback="compiled successfully (not yet verified)")
    printed = _printed(built)
    assert not _shown("reward -1", printed) and _shown("ok not judged yet: no reward before verify", printed)
    failed = Verdict(status="compile_error", stage="compile", backend="cpu", feedback="compile error:")
    assert _shown("reward -1", _printed(failed))
