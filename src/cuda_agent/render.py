"""Readable terminal views of verdicts (rich)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .judge.verdict import Verdict

STATUS_STYLE = {"ok": "green", "incorrect": "yellow", "compile_error": "red", "runtime_error": "red",
          "timeout": "red", "forbidden": "magenta"}


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]], figures: tuple[str, ...] = ()) -> Table:
    """A table that folds what it cannot fit rather than cutting it short with an ellipsis; the
    ``figures`` columns (right-aligned) keep each number on one line, and their headers fold."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for i, col in enumerate(columns):
        widest = max((Text.from_markup(row[i]).cell_len for row in rows), default=1)
        table.add_column(col, justify="right" if col in figures else "left", overflow="fold",
                         min_width=widest if col in figures else None)
    for row in rows:
        table.add_row(*row)
    return table


def _head(verdict: Verdict, style: str) -> Text:
    head = Text()
    head.append(f"{verdict.status}", style=f"bold {style}")
    if verdict.stage == "compile" and verdict.status == "ok":
        # Nothing has run yet: a reward (-1 until a check passes) would read as a failure.
        head.append("   not judged yet: no reward before verify", style="bold")
        return head
    head.append(f"   reward {verdict.reward}", style="bold")
    if verdict.speedup_vs_eager is not None:
        head.append(f"   {verdict.speedup_vs_eager:.2f}x vs eager")
    if verdict.speedup_vs_compile is not None:
        head.append(f"   {verdict.speedup_vs_compile:.2f}x vs torch.compile")
    return head


def _timings(verdict: Verdict) -> Table:
    rows = [(name, _fmt_ms(stats.median_ms), f"{stats.spread * 100:.1f}%", str(stats.calls),
             _fmt_ms(stats.device_median_ms), f"{stats.source}, unsettled" if stats.stable is False else stats.source)
            for name, stats in verdict.timings.items() if stats is not None]
    return _table(("", "median", "IQR/median", "calls", "device median", "source"), rows,
                  figures=("median", "IQR/median", "calls", "device median"))


def _checks(verdict: Verdict) -> Table:
    # The largest elementwise relative error comes from outputs near zero, where any rounding is a
    # huge fraction: it explains a failure, and only alarms on a pass. A pass is judged on the
    # error relative to the output's magnitude (L2).
    rows = [(str(c.index + 1), c.phase, "[green]pass[/]" if c.passed else "[red]fail[/]", _fmt(c.max_abs_error),
             _fmt(c.norm_rel_error), "-" if c.passed else _fmt(c.max_rel_error)) for c in verdict.checks]
    return _table(("check", "phase", "result", "max abs err", "L2 rel err", "max rel err"), rows,
                  figures=("max abs err", "L2 rel err", "max rel err"))


class _Titled:
    """A panel whose title goes in its body when the border is too narrow for it (a border cuts it)."""

    def __init__(self, body: list, title: str, style: str):
        self.body, self.title, self.style = body, title, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fits = cell_len(self.title) + 6 <= options.max_width
        body = self.body if fits or not self.title else [Text(self.title, style="bold"), *self.body]
        yield Panel(Group(*body), title=self.title if fits else None, border_style=self.style)


def verdict_panel(verdict: Verdict, title: str = "") -> _Titled:
    style = STATUS_STYLE.get(verdict.status, "white")
    parts: list = [_head(verdict, style)]
    if verdict.speedup_withheld:
        parts.append(Text(f"no speedup claimed: {verdict.speedup_withheld}", style="bold yellow"))
    elif verdict.compile_speedup_withheld:
        parts.append(Text(f"no speedup over torch.compile claimed: {verdict.compile_speedup_withheld}",
                          style="bold yellow"))
    if any(verdict.timings.values()):
        parts += [Text(), _timings(verdict)]
    if verdict.checks:
        parts += [Text(), _checks(verdict)]
    parts += [Text(), Text(verdict.feedback)]
    # In the body, where they wrap: a title or subtitle is cut at the panel's width.
    if verdict.seconds:
        seconds = ", ".join(f"{k} {v:.1f} s" for k, v in verdict.seconds.items())
        parts.append(Text(f"stages: {seconds}", style="dim"))
    parts.append(Text(f"{verdict.backend} · {verdict.device.get('name', verdict.backend)}", style="dim"))
    return _Titled(parts, title or verdict.task, style)


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
