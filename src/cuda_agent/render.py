"""Readable terminal views of verdicts (rich)."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .judge.verdict import Verdict

STATUS_STYLE = {"ok": "green", "incorrect": "yellow", "compile_error": "red", "runtime_error": "red",
          "timeout": "red", "forbidden": "magenta"}


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def verdict_panel(verdict: Verdict, title: str = "") -> Panel:
    style = STATUS_STYLE.get(verdict.status, "white")
    head = Text()
    head.append(f"{verdict.status}", style=f"bold {style}")
    head.append(f"   reward {verdict.reward}", style="bold")
    if verdict.speedup_vs_eager is not None:
        head.append(f"   {verdict.speedup_vs_eager:.2f}x vs eager")
    if verdict.speedup_vs_compile is not None:
        head.append(f"   {verdict.speedup_vs_compile:.2f}x vs torch.compile")
    parts: list = [head]

    if any(verdict.timings.values()):
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("", "median", "IQR/median", "calls", "device median", "source"):
            table.add_column(col, justify="right" if col else "left")
        for name, stats in verdict.timings.items():
            if stats is None:
                continue
            table.add_row(name, _fmt_ms(stats.median_ms), f"{stats.spread * 100:.1f}%", str(stats.calls),
                          _fmt_ms(stats.device_median_ms), stats.source)
        parts += [Text(), table]

    if verdict.checks:
        checks = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("check", "phase", "result", "max abs err", "max rel err"):
            checks.add_column(col)
        for c in verdict.checks:
            checks.add_row(str(c.index + 1), c.phase, "[green]pass[/]" if c.passed else "[red]fail[/]",
                           f"{c.max_abs_error:.3g}" if c.max_abs_error is not None else "-",
                           f"{c.max_rel_error:.3g}" if c.max_rel_error is not None else "-")
        parts += [Text(), checks]

    parts += [Text(), Text(verdict.feedback)]
    if verdict.seconds:  # in the body, where it wraps: a subtitle is cut at the panel's width
        seconds = ", ".join(f"{k} {v:.1f} s" for k, v in verdict.seconds.items())
        parts.append(Text(f"stages: {seconds}", style="dim"))
    device = verdict.device.get("name", verdict.backend)
    return Panel(Group(*parts), title=title or verdict.task, subtitle=f"{verdict.backend} · {device}",
                 border_style=style)


# The judge's progress messages, by the stage they belong to: (stage, how the message starts).
JUDGE_STAGES = (("build", ("checking the solution's format", "building")),
                ("verify", ("starting", "check ")),
                ("time", ("timing",)))


def judge_stage(message: str, last: str) -> str:
    """The stage a progress message belongs to (the last one, for a message no stage names)."""
    for stage, starts in JUDGE_STAGES:
        if message.startswith(starts):
            return stage
    return last


class JudgeProgress:
    """One line on the terminal while a judge runs: which stage of how many, what it is doing,
    and the time since it started. Stages past the one the command asked for are not counted."""

    def __init__(self, console, last_stage: str):
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        names = [name for name, _ in JUDGE_STAGES]
        self.stages = names[:names.index(last_stage) + 1] if last_stage in names else names
        self.stage = self.stages[0]
        self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                             console=console, transient=True)
        self._task = self._bar.add_task(self._describe("starting"), total=None)

    def _describe(self, message: str) -> str:
        number = self.stages.index(self.stage) + 1 if self.stage in self.stages else len(self.stages)
        return f"stage {number}/{len(self.stages)} ({self.stage}): {message}"

    def __call__(self, message: str) -> None:
        self.stage = judge_stage(message, self.stage)
        self._bar.update(self._task, description=self._describe(message))

    def __enter__(self) -> "JudgeProgress":
        self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.__exit__(*exc)
