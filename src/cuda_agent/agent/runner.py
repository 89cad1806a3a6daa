"""Many episodes at once: one event loop, one model client, one judge pool, a live view.

Episodes live under ``OUT/<task>/<NN>/``. Running the same command again resumes every episode
that had not ended and skips those that had, so a crash or an interrupt loses at most the turn
in progress. One episode failing never stops the others; it is reported with its error.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..device import DeviceInfo
from ..files import write_atomic
from ..judge.pools import JudgePool
from ..task import Task
from ..llm.base import LLMClient
from .loop import RESULT_FILE, AgentSettings, Episode, EpisodeResult, EpisodeStatus
from ..llm.messages import Usage
from .replay import fmt_speedup

SUMMARY_FILE = "summary.json"
MAX_ROWS = 24  # rows of the live table; the rest are counted


@dataclass
class EpisodeSpec:
    task: Task
    directory: Path
    episode_id: str


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "task"


def plan_episodes(tasks: list[Task], out: Path, episodes_per_task: int) -> list[EpisodeSpec]:
    specs: list[EpisodeSpec] = []
    seen: dict[str, int] = {}
    for task in tasks:
        base = slug(task.name)
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}-{seen[base]}"  # tasks sharing a name (dataset rows)
        for index in range(episodes_per_task):
            specs.append(EpisodeSpec(task, out / name / f"{index:02d}", f"{name}-{index:02d}"))
    return specs


class LiveView:
    """The table of episodes shown while they run."""

    def __init__(self, specs: list[EpisodeSpec]):
        self.rows = {s.episode_id: EpisodeStatus(s.episode_id, s.task.name) for s in specs}

    def update(self, status: EpisodeStatus) -> None:
        self.rows[status.episode_id] = status

    def __rich__(self) -> Group:
        table = Table(title="episodes", expand=False)
        for column in ("episode", "turn", "last verdict", "best vs compile", "tokens", "state"):
            table.add_column(column)
        running = [s for s in self.rows.values() if s.stop_reason is None]
        finished = [s for s in self.rows.values() if s.stop_reason is not None]
        shown = (running + finished)[:MAX_ROWS]
        for s in shown:
            state = Text(s.stop_reason or ("running" if s.turn else "waiting"),
                         style="green" if s.stop_reason == "finished" else ("yellow" if s.stop_reason else "cyan"))
            table.add_row(s.episode_id, str(s.turn), s.last_verdict or "-", fmt_speedup(s.best_speedup), str(s.tokens),
                          state)
        hidden = len(self.rows) - len(shown)
        footer = Text(f"{len(finished)}/{len(self.rows)} ended" + (f"; {hidden} more not shown" if hidden else ""),
                      style="dim")
        return Group(table, footer)


async def run_episodes(specs: list[EpisodeSpec], client: LLMClient, judge: JudgePool, *,
                       settings: AgentSettings | None = None, provider: str = "openai",
                       device: DeviceInfo | None = None, concurrency: int = 8, hidden: list[Path] | None = None,
                       console: Console | None = None, live: bool = True) -> list[EpisodeResult]:
    """Run (or resume) every episode, at most ``concurrency`` at a time; results in ``specs`` order."""
    view = LiveView(specs)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(spec: EpisodeSpec) -> EpisodeResult:
        async with gate:
            episode = Episode(spec.task, client, judge, spec.directory, settings=settings, provider=provider,
                              device=device, episode_id=spec.episode_id, hidden=hidden, on_status=view.update)
            try:
                return await episode.run()
            except Exception as exc:  # one broken episode must not take the others down
                status = EpisodeStatus(spec.episode_id, spec.task.name, stop_reason="crashed")
                view.update(status)
                return EpisodeResult(spec.episode_id, spec.task.name, "crashed", episode.turn, 0.0, episode.usage,
                                     episode.best.summary() if episode.best else None, spec.directory,
                                     error=f"{type(exc).__name__}: {exc}")

    tasks = [one(spec) for spec in specs]
    if live and console is not None:
        with Live(view, console=console, refresh_per_second=4, transient=False):
            return list(await asyncio.gather(*tasks))
    return list(await asyncio.gather(*tasks))


def summarise(results: list[EpisodeResult]) -> dict[str, Any]:
    """The run's figures: stop reasons, how many found a correct solution, speedups, tokens."""
    speedups = [r.best["speedup_vs_compile"] for r in results
                if r.best and r.best.get("speedup_vs_compile") is not None]
    usage = sum((r.usage for r in results), Usage())
    overheads = [x for r in results for x in r.overhead_ms]
    reasons: dict[str, int] = {}
    for r in results:
        reasons[r.stop_reason] = reasons.get(r.stop_reason, 0) + 1
    return {
        "episodes": len(results),
        "stop_reasons": reasons,
        "correct": sum(1 for r in results if r.best),
        "faster_than_compile": sum(1 for s in speedups if s > 1.0),
        "best_speedup_vs_compile": max(speedups, default=None),
        "geomean_speedup_vs_compile": statistics.geometric_mean(speedups) if speedups else None,
        "turns": sum(r.turns for r in results),
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        "median_overhead_ms": statistics.median(overheads) if overheads else None,
        "results": [r.to_dict() for r in results],
    }


def recorded_results(out: Path) -> list[EpisodeResult]:
    """Every ended episode under ``out`` (OUT/TASK/NN/result.json), of this run and earlier ones."""
    found = []
    for path in sorted(out.glob(f"*/*/{RESULT_FILE}")):
        try:
            found.append(EpisodeResult.from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, TypeError, KeyError):
            continue  # cut short by a crash: that episode resumes when its task is run again
    return found


def write_summary(out: Path, results: list[EpisodeResult]) -> dict[str, Any]:
    """OUT/summary.json over every episode OUT holds: runs on other tasks into the same OUT keep
    theirs; this run's ``results`` (crashed episodes, which leave no result file, included) win."""
    episodes = {r.directory.resolve(): r for r in recorded_results(out)}
    episodes.update({Path(r.directory).resolve(): r for r in results})
    summary = summarise(sorted(episodes.values(), key=lambda r: str(r.directory)))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / SUMMARY_FILE, json.dumps(summary, indent=2, default=str))
    return summary


def summary_table(results: list[EpisodeResult]) -> Table:
    table = Table(title="results")
    for column in ("episode", "stop", "turns", "best", "vs eager", "vs compile", "reward", "tokens", "time"):
        table.add_column(column)
    for r in results:
        b = r.best or {}
        table.add_row(r.episode_id, r.stop_reason + (f" ({r.error[:60]})" if r.error else ""), str(r.turns),
                      b.get("stage", "-") if b else "-", fmt_speedup(b.get("speedup_vs_eager")),
                      fmt_speedup(b.get("speedup_vs_compile")), str(b.get("reward", "-")) if b else "-",
                      str(r.usage.input_tokens + r.usage.output_tokens), f"{r.elapsed_s:.0f}s")
    return table
