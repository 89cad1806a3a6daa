"""Rejection fine-tuning data: the agent's trajectories, filtered, as verl ``MultiTurnSFTDataset`` rows.

The paper's two filters (§3.3), each a named rule so the report can say how many trajectories it
dropped (a trajectory is dropped by the first rule it breaks, in this order):

* ``unfinished``: the episode has no end (it was cut off, or its model became unreachable).
* ``budget_overrun``: it ended because a budget ran out (turns, wall time, context; in the verl
  loop, ``max_response_length``: its tokens filled the response budget).
* ``unknown_tool``, ``malformed_call``: a call names no tool of the agent, or its arguments are
  not a JSON object that fits the tool's schema (the hallucinated calls the paper drops).
* ``repeated_calls``: the same call (tool and arguments) ``max_repeats`` times in a row, the
  redundant loop the paper drops.
* ``outcome``: the best solution's reward is not above ``min_reward`` (default: keep correct ones).

A kept trajectory becomes one row: ``messages`` in OpenAI's format (assistant ``tool_calls`` with
their arguments as JSON text, which Parquet can hold whatever the tool; ``role: tool`` results
with ``tool_call_id``), ``tools`` (the agent's tool schemas, a list of dicts), and its task,
reward and source file for reference. Readers turn the arguments back into objects
(``llm.messages.with_object_arguments``) before a chat template sees them, as the verl loop
renders them in rollouts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from ..llm.messages import openai_message
from ..agent.trajectory import Trajectory, TrajectoryError, load_trajectory
from .models import reward_key
from .rows import DatasetError, tool_schemas

RULES = ("unfinished", "budget_overrun", "unknown_tool", "malformed_call", "repeated_calls", "outcome")
OVERRUNS = frozenset({"max_turns", "max_wall_time", "context_exhausted",
                      "max_response_length"})  # the verl loop's token budget (verl_loop)


@dataclass
class RFTFilter:
    min_reward: float = 0.0
    max_repeats: int = 3


@dataclass
class RFTReport:
    trajectories: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {rule: 0 for rule in RULES})
    unreadable: list[str] = field(default_factory=list)     # files, or lines of a loop log, that did not load
    superseded: int = 0   # loop-log trajectories of an earlier run of the same collection (a rerun replaces them)
    rewards: dict[str, int] = field(default_factory=dict)   # reward of the kept ones -> count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _validators() -> dict[str, jsonschema.Draft202012Validator]:
    return {s["function"]["name"]: jsonschema.Draft202012Validator(s["function"]["parameters"]) for s in tool_schemas()}


def call_problem(name: str, arguments: str, validators: dict[str, Any]) -> str | None:
    """The rule a call breaks (``unknown_tool`` or ``malformed_call``), or None."""
    if name not in validators:
        return "unknown_tool"
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return "malformed_call"
    if not isinstance(args, dict) or any(True for _ in validators[name].iter_errors(args)):
        return "malformed_call"
    return None


def broken_rule(traj: Trajectory, rules: RFTFilter, validators: dict[str, Any]) -> str | None:
    """The first rule ``traj`` breaks, or None if it is kept."""
    end = traj.end
    if end is None:
        return "unfinished"
    if end.get("stop_reason") in OVERRUNS:
        return "budget_overrun"
    calls = [c for m in traj.messages() if m.role == "assistant" for c in m.tool_calls]
    for call in calls:
        if problem := call_problem(call.name, call.arguments, validators):
            return problem
    run = 1
    for before, after in zip(calls, calls[1:]):
        run = run + 1 if (before.name, before.arguments) == (after.name, after.arguments) else 1
        if run >= rules.max_repeats:
            return "repeated_calls"
    best = traj.best
    if best is None or best.get("reward") is None or float(best["reward"]) <= rules.min_reward:
        return "outcome"
    return None


def sft_row(traj: Trajectory) -> dict[str, Any]:
    best = traj.best or {}
    return {"messages": [openai_message(m) for m in traj.messages()], "tools": tool_schemas(),
            "task_id": str(traj.header.get("task", {}).get("name", "")), "reward": float(best.get("reward", -1)),
            "trajectory": str(traj.path)}


LOOP_LOG_FORMAT = "cuda_agent.verl_loop/1"  # the verl agent loop's log (verl_loop writes it)


def find_trajectories(roots: list[Path | str]) -> list[Path]:
    """Every trajectory file under the given files or folders: the agent's trajectory.jsonl, and the
    verl agent loop's logs (trajectories-*.jsonl, one trajectory a line)."""
    found: list[Path] = []
    for root in map(Path, roots):
        if root.is_file():
            found.append(root)
        elif root.is_dir():
            found.extend(sorted(root.rglob("trajectory.jsonl")) + sorted(root.rglob("trajectories-*.jsonl")))
        else:
            raise DatasetError(f"no trajectory file or folder at {root}")
    if not found:
        raise DatasetError(f"no trajectory.jsonl under {', '.join(map(str, roots))}: run the agent first "
                           "(cuda-agent optimize, or the collect stage)")
    return found


def loop_log_trajectory(path: Path, number: int, entry: dict[str, Any]) -> Trajectory:
    """One line of the verl agent loop's log as a Trajectory, so the same rules apply to it."""
    header = {"type": "header", "t": 0, "version": 1, "task": entry.get("task", {}), "provider": "verl"}
    events: list[dict[str, Any]] = []
    turn = 0
    for message in entry.get("messages", []):
        turn += message.get("role") == "assistant"
        kind = "tool" if message.get("role") == "tool" else "message"
        if message.get("tool_calls"):
            message = {**message, "tool_calls": [
                {"id": c.get("id", ""), "name": c["function"]["name"],
                 "arguments": a if isinstance(a := c["function"].get("arguments"), str) else json.dumps(a)}
                for c in message["tool_calls"]]}
        events.append({"type": kind, "t": 0, "turn": turn, "message": message})
    if entry.get("best"):
        events.append({"type": "best", "t": 0, "turn": turn, **entry["best"]})
    events.append({"type": "end", "t": 0, "turn": turn, "stop_reason": entry.get("stop_reason", "")})
    if entry.get("run"):
        header["run"] = str(entry["run"])
    return Trajectory(path=Path(f"{path}:{number}"), header=header, events=events)


def is_loop_log(path: Path) -> bool:
    """Whether ``path`` is a verl loop log: its first readable line says so (a torn first line
    is skipped like any other)."""
    with open(path, errors="replace") as fh:
        for line in fh:
            try:
                head = json.loads(line)
            except json.JSONDecodeError:
                continue
            return isinstance(head, dict) and head.get("format") == LOOP_LOG_FORMAT
    return False


def load_trajectories(path: Path, unreadable: list[str] | None = None) -> list[Trajectory]:
    """The trajectories in a file: one for the agent's trajectory.jsonl, one a line for a loop log.
    A loop-log line that does not load (cut short by a crash, say) is skipped alone and named in
    ``unreadable``; the file's other lines still count."""
    if not is_loop_log(path):
        return [load_trajectory(path)]
    found = []
    with open(path, errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                found.append(loop_log_trajectory(path, number, json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                if unreadable is not None:
                    unreadable.append(f"{path}:{number}: {type(exc).__name__}: {exc}")
    return found


def latest_runs(trajectories: list[Trajectory]) -> tuple[list[Trajectory], int]:
    """Rerunning the collect stage samples every task again. Per folder and task, only the newest
    run's loop-log trajectories count, so a rerun replaces the earlier run's instead of doubling
    them; (the trajectories kept, how many were superseded)."""
    def group(t: Trajectory) -> tuple[str, str]:
        return str(Path(str(t.path).rsplit(":", 1)[0]).parent), str(t.header.get("task", {}).get("name", ""))

    newest: dict[tuple[str, str], str] = {}
    for t in trajectories:
        if run := t.header.get("run"):
            newest[group(t)] = max(newest.get(group(t), ""), run)
    kept = [t for t in trajectories if not t.header.get("run") or t.header["run"] == newest[group(t)]]
    return kept, len(trajectories) - len(kept)


def rft_rows(paths: list[Path], rules: RFTFilter | None = None) -> tuple[list[dict[str, Any]], RFTReport]:
    rules = rules or RFTFilter()
    validators = _validators()
    report = RFTReport()
    rows = []
    loaded: list[Trajectory] = []
    for path in paths:
        try:
            loaded.extend(load_trajectories(path, report.unreadable))
        except (TrajectoryError, json.JSONDecodeError, KeyError, OSError) as exc:
            report.unreadable.append(f"{path}: {exc}")
    loaded, report.superseded = latest_runs(loaded)
    report.trajectories = len(loaded) + len(report.unreadable)
    for traj in loaded:
        if rule := broken_rule(traj, rules, validators):
            report.dropped[rule] += 1
            continue
        row = sft_row(traj)
        rows.append(row)
        report.kept += 1
        key = reward_key(row["reward"])
        report.rewards[key] = report.rewards.get(key, 0) + 1
    return rows, report


def without_nulls(value: Any) -> Any:
    """Parquet stores a list of differing dicts as one struct, filling absent keys with null: drop
    them again, so tool schemas and messages read back as they were written."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value
