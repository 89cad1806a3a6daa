"""What a bench run is doing now: jobs done, and per job in flight its problem, the judge's stage
and message, and the time it has taken so far.

The judge names its stage through progress messages (``cuda_agent.render.judge_stage`` reads
them); a local pool carries them back from its processes (``LocalJudgePool``'s ``progress``). With
a pool that does not (Ray's), a job's line names its problem and kind only, with its elapsed time.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ..render import judge_stage

STAGE_WORDS = {"build": "building", "verify": "verifying", "time": "timing"}


def describe_job(level: int, name: str, sample: int | None, reference: bool) -> str:
    """The job's name on its line: "baselines of level 1 problem 19_ReLU.py", or the sample judged."""
    problem = f"level {level} problem {name}"
    if reference:
        return f"baselines of {problem}"
    return f"{problem}, " + ("its solution" if sample is None else f"sample {sample}")


class JobLine:
    """One job in flight: a callback for the judge's messages, which keeps its line current."""

    def __init__(self, view: "BenchProgress", what: str):
        self.view, self.what = view, what
        self.stage, self.message = "", ""
        self.task = view.bar.add_task(self.describe(), total=None)

    def describe(self) -> str:
        if self.stage not in STAGE_WORDS:  # before the judge names a stage: what the bench said
            return f"  {self.what}: {self.message or 'starting'}"
        return f"  {self.what}: {STAGE_WORDS[self.stage]} ({self.message})"

    def __call__(self, message: str) -> None:
        self.stage = judge_stage(message, self.stage)
        self.message = message
        self.view.bar.update(self.task, description=self.describe())

    def done(self) -> None:
        self.view.bar.remove_task(self.task)


class BenchProgress:
    """The run's lines: jobs done of all and the last result, then a line per job in flight."""

    def __init__(self, console: Console | None, total: int):
        self.total, self.finished, self.last = total, 0, ""
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), TimeElapsedColumn(),
                            console=console, disable=console is None)
        self._overall = self.bar.add_task(self._headline(), total=total)

    def _headline(self) -> str:
        last = f"; last: {self.last}" if self.last else ""
        return f"[bold]judging {self.finished}/{self.total}[/]{last}"

    def start(self, what: str) -> JobLine:
        return JobLine(self, what)

    def finish(self, line: JobLine, outcome: str) -> None:
        line.done()
        self.finished += 1
        self.last = f"{line.what}: {outcome}"
        self.bar.update(self._overall, advance=1, description=self._headline())

    def lines(self) -> list[str]:
        """Every line's text, headline first (what the terminal shows, without the bars)."""
        return [task.description for task in self.bar.tasks]

    def __enter__(self) -> "BenchProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)
