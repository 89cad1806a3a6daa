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
    seconds = ", ".join(f"{k} {v:.1f}s" for k, v in verdict.seconds.items())
    device = verdict.device.get("name", verdict.backend)
    subtitle = f"{verdict.backend} · {device} · {seconds}"
    return Panel(Group(*parts), title=title or verdict.task, subtitle=subtitle, border_style=style)
