"""Trajectory files: one JSONL file per episode, written as it goes, read back for replay and resume.

Format (version 1). One JSON object per line, appended while the episode runs. Every event has
``"type"`` and ``"t"`` (seconds since the episode started, a float). A line is only complete once
its newline is written: a last line without one is what a process killed mid-write leaves, and is
ignored by readers and cut off by a writer that reopens the file.

``header`` (always the first line)::

    {"type": "header", "t": 0.0, "version": 1, "episode_id": str,
     "task": {"name": str, "sha256": str, "source": str},
     "model": str, "provider": str, "backend": str,
     "settings": {"env": {max_turns, max_wall_s, ...}, "context": {window, reserve, ...}} (AgentSettings),
     "started_at": ISO-8601 UTC}

``message``: a system, user or assistant message. ``usage``, ``latency_s``, ``retries`` and
``finish_reason`` describe the model's completion, so they are set on assistant messages only::

    {"type": "message", "t", "turn": int, "message": Message.to_dict(),
     "usage": {"input_tokens": int, "output_tokens": int} | null,
     "latency_s": float | null, "retries": int, "finish_reason": str | null}

``tool``: one tool call and its result. ``message`` is the role ``tool`` message the model was
given; ``verdict`` is a judge verdict (``Verdict.to_dict()``) for compile, verify and profile::

    {"type": "tool", "t", "turn", "call": {"id", "name", "arguments"},
     "message": Message.to_dict(), "is_error": bool, "duration_s": float,
     "verdict": dict | null, "data": dict}

``best``: a new best solution, with its files::

    {"type": "best", "t", "turn", "stage": str, "correct": bool, "speedup_vs_compile": float | null,
     "speedup_vs_eager": float | null, "reward": int, "files": {relative path: text}}

``note``: something the loop did that the model may not see (``kind`` such as ``context_elided``,
``resumed``, ``protected_restored``, ``llm_retry``)::

    {"type": "note", "t", "turn", "kind": str, "text": str}

``end`` (the last line of a finished episode)::

    {"type": "end", "t", "turn", "stop_reason": str, "elapsed_s": float,
     "usage": {"input_tokens", "output_tokens"},
     "best": {"stage", "speedup_vs_compile", "speedup_vs_eager", "reward"} | null}

Turns: the system and user messages that open the episode are turn 0; the model's n-th answer is
turn n, and the tool events, best events and notes it leads to carry the same number.
Readers keep events of unknown types, so later versions may add some.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import CudaAgentError
from ..judge.verdict import finite
from ..llm.messages import Message, Usage

FORMAT_VERSION = 1
EVENT_TYPES = ("header", "message", "tool", "best", "note", "end")
_TAIL_CHUNK = 64 * 1024


class TrajectoryError(CudaAgentError):
    """A trajectory file cannot be read, or cannot be resumed."""


# -- writing ------------------------------------------------------------------------------------

class TrajectoryWriter:
    """Appends events to a trajectory file, one JSON line each, flushed but not synced per event.

    Reopening an existing file first cuts off a trailing partial line, so appending keeps the file
    valid JSONL; ``cut_bytes`` says how much was cut. ``close`` syncs the file to disk.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cut_bytes = _cut_partial_tail(self.path)
        self._needs_header = not self.path.exists() or self.path.stat().st_size == 0
        self._fh: IO[str] | None = open(self.path, "a", encoding="utf-8")

    def write(self, event: dict[str, Any]) -> None:
        """Append one event (which must carry ``type`` and ``t``) and flush it."""
        if self._fh is None:
            raise ValueError(f"trajectory {self.path} is closed; open a new TrajectoryWriter to append")
        kind = event.get("type")
        if kind not in EVENT_TYPES or "t" not in event:
            raise ValueError(f"a trajectory event needs a 'type' (one of {', '.join(EVENT_TYPES)}) "
                             f"and a 't'; got type {kind!r} with keys {sorted(event)}")
        if self._needs_header and kind != "header":
            raise ValueError(f"the first event of trajectory {self.path} must be the header, not {kind!r}")
        self._fh.write(_dumps(event) + "\n")
        self._fh.flush()
        self._needs_header = False

    def close(self) -> None:
        """Flush, sync to disk and close; closing twice is harmless."""
        if self._fh is None:
            return
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()
            self._fh = None

    @property
    def closed(self) -> bool:
        return self._fh is None

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dumps(event: dict[str, Any]) -> str:
    # ASCII output: a lone surrogate in model text can then never make a write fail.
    try:
        return json.dumps(event, allow_nan=False, default=_plain)
    except ValueError:  # inf or nan somewhere: JSON has neither, record null as verdicts do
        return json.dumps(finite(event), allow_nan=False, default=_plain)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"a trajectory event holds a {type(value).__name__}, which is not plain JSON; "
                    "convert it to dicts, lists, strings and numbers first")


def _cut_partial_tail(path: Path) -> int:
    """Truncate ``path`` after its last newline; returns the number of bytes removed."""
    if not path.exists():
        return 0
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            fh.seek(start)
            chunk = fh.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
        return size - keep


# -- reading ------------------------------------------------------------------------------------

@dataclass
class Trajectory:
    """A trajectory file read back. ``events`` are all events after the header, in file order."""

    path: Path
    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    ignored_tail: str = ""   # a partial last line that was left out

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    def messages(self) -> list[Message]:
        """The conversation in order: message events and the tool results the model was given."""
        return _messages(self.events)

    @property
    def turns(self) -> int:
        """The highest turn number of any event (0 before the model's first answer)."""
        return max((int(e.get("turn") or 0) for e in self.events), default=0)

    @property
    def best(self) -> dict[str, Any] | None:
        bests = self.of_type("best")
        return bests[-1] if bests else None

    @property
    def end(self) -> dict[str, Any] | None:
        ends = self.of_type("end")
        return ends[-1] if ends else None

    @property
    def stop_reason(self) -> str | None:
        end = self.end
        return str(end.get("stop_reason")) if end else None

    @property
    def usage(self) -> Usage:
        """Tokens summed over the model's answers (every completion, retried ones included)."""
        return _usage(self.events)

    @property
    def elapsed_s(self) -> float:
        """Seconds from the episode's start to its last recorded event."""
        last = self.events[-1] if self.events else self.header
        return float(last.get("t") or 0.0)

    def verdicts(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every judge verdict as (turn, tool name, verdict dict), in order."""
        return [(int(e.get("turn") or 0), _call_name(e), e["verdict"])
                for e in self.of_type("tool") if isinstance(e.get("verdict"), dict)]

    def tool_calls(self) -> int:
        return len(self.of_type("tool"))

    def tool_counts(self) -> dict[str, int]:
        """Tool calls by tool name, most used first."""
        return dict(Counter(_call_name(e) for e in self.of_type("tool")).most_common())

    def tool_errors(self) -> int:
        return sum(1 for e in self.of_type("tool") if e.get("is_error"))

    def notes(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.of_type("note") if kind is None or e.get("kind") == kind]


def load_trajectory(path: Path | str) -> Trajectory:
    """Read a trajectory file; raises TrajectoryError saying which line is wrong and what to do."""
    path = Path(path)
    lines, tail = _read_lines(path)
    records = [(number, _parse_line(path, number, line)) for number, line in lines if line.strip()]
    if not records:
        raise TrajectoryError(f"trajectory {path} has no complete line: the episode wrote nothing before "
                              "it stopped. Run the episode again.")
    header = records[0][1]
    if header.get("type") != "header":
        raise TrajectoryError(f"{path} is not a trajectory: line {records[0][0]} should be the header "
                              f"(type 'header') but has type {header.get('type')!r}. "
                              "Pass the .jsonl file an agent episode wrote.")
    version = header.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise TrajectoryError(f"trajectory {path} has format version {version!r}; this cuda-agent reads "
                              f"version {FORMAT_VERSION} and older. Upgrade cuda-agent to read it.")
    return Trajectory(path=path, header=header, events=[event for _, event in records[1:]], ignored_tail=tail)


def _read_lines(path: Path) -> tuple[list[tuple[int, str]], str]:
    """Numbered complete lines, and the partial last line (without its newline) if there is one."""
    if not path.is_file():
        raise TrajectoryError(f"no trajectory file at {path}: check the path (an episode writes one "
                              ".jsonl file in its output directory).")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TrajectoryError(f"{path} is not a trajectory: it is not UTF-8 text ({exc}). "
                              "Pass the .jsonl file an agent episode wrote.") from None
    parts = text.split("\n")
    tail = parts.pop()  # after the last newline: empty, or a line whose write was cut short
    return list(enumerate(parts, start=1)), tail


def _parse_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TrajectoryError(f"trajectory {path}, line {number}: not valid JSON ({exc.msg} at column "
                              f"{exc.colno}). The file was damaged; delete that line (and any after it "
                              "that are damaged too) to read the rest.") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise TrajectoryError(f"trajectory {path}, line {number}: not a trajectory event (each line must "
                              "be a JSON object with a 'type'). Pass the .jsonl file an agent episode wrote.")
    message = event.get("message")
    if event["type"] in ("message", "tool") and not (isinstance(message, dict) and message.get("role")):
        raise TrajectoryError(f"trajectory {path}, line {number}: a {event['type']} event without a message "
                              "(an object with a 'role'). The file was damaged; delete that line to read the rest.")
    return event


def _messages(events: list[dict[str, Any]]) -> list[Message]:
    return [Message.from_dict(e["message"]) for e in events
            if e.get("type") in ("message", "tool") and isinstance(e.get("message"), dict)]


def _usage(events: list[dict[str, Any]]) -> Usage:
    total = Usage()
    for e in events:
        usage = e.get("usage") if e.get("type") == "message" else None
        if isinstance(usage, dict):
            total += Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
    return total


def _call_name(event: dict[str, Any]) -> str:
    call = event.get("call")
    return str(call.get("name", "?")) if isinstance(call, dict) else "?"


def _call_id(event: dict[str, Any]) -> str | None:
    call = event.get("call")
    if isinstance(call, dict) and call.get("id") is not None:
        return str(call["id"])
    message = event.get("message")
    return message.get("tool_call_id") if isinstance(message, dict) else None


# -- resuming -----------------------------------------------------------------------------------

@dataclass
class ResumeState:
    """Where a stopped episode picks up.

    ``messages`` is the conversation to send next; ``turn`` is the last turn the model completed
    (its next answer is ``next_turn``). ``best`` is the last best event in the file, ``elapsed_s``
    the episode's clock at its last event and ``usage`` the tokens spent so far, a dropped turn's
    included. ``dropped`` says what was left out of ``messages`` ("" if nothing), for a note:
    every assistant message whose tool calls did not all get a result is left out with its partial
    results, wherever it is, though the file (and ``Trajectory.messages()``) keeps them.
    """

    header: dict[str, Any]
    messages: list[Message]
    turn: int
    best: dict[str, Any] | None
    elapsed_s: float
    usage: Usage
    dropped: str = ""

    @property
    def next_turn(self) -> int:
        return self.turn + 1

    def describe(self) -> str:
        """One sentence for the ``resumed`` note."""
        text = f"resumed after turn {self.turn} at {self.elapsed_s:.1f} s"
        return f"{text}; {self.dropped}" if self.dropped else text


def resume_state(traj: Trajectory) -> ResumeState:
    """The state to continue ``traj`` from; an episode that already ended cannot be resumed."""
    end = traj.end
    if end is not None:
        raise TrajectoryError(f"trajectory {traj.path} already ended at turn {end.get('turn')} "
                              f"(stop reason: {end.get('stop_reason')}); it cannot be resumed. "
                              "Start a new episode instead.")
    kept, dropped = _drop_dangling_turns(traj.events)
    if traj.ignored_tail:
        dropped.append(f"ignored a partial last line ({len(traj.ignored_tail)} characters) left by an "
                       "interrupted write")
    assistant_turns = [int(e.get("turn") or 0) for e in kept
                       if e.get("type") == "message" and (e.get("message") or {}).get("role") == "assistant"]
    return ResumeState(header=traj.header, messages=_messages(kept), turn=max(assistant_turns, default=0),
                       best=traj.best, elapsed_s=traj.elapsed_s, usage=traj.usage, dropped="; ".join(dropped))


def _drop_dangling_turns(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Leave out, anywhere in the history, every assistant message some of whose tool calls have no
    result, with the results it did get, so the conversation sent to the model never holds a tool
    call without its result (providers reject that). The last such message is the turn the model
    redoes; earlier ones are turns an earlier resume dropped, which stay in the file.

    A tool result belongs to the assistant message before it (no other assistant message between)
    that made a call with its id: a redone turn has the same turn number as the one it replaces,
    and may even reuse its call ids, so neither the turn nor the id alone says which it answers.
    Tool results that answer no such call are left out too.
    """
    owner: dict[int, int] = {}          # tool event index -> index of the assistant message it answers
    answered: dict[int, set[str]] = {}  # assistant message index -> call ids with a result
    current: int | None = None
    orphans: list[int] = []
    for index, event in enumerate(events):
        kind = event.get("type")
        if kind == "message" and _is_assistant(event):
            current = index
            answered[index] = set()
        elif kind == "tool":
            call_id = _call_id(event)
            if current is not None and call_id in _call_ids(events[current]):
                owner[index] = current
                answered[current].add(str(call_id))
            else:
                orphans.append(index)

    drop: set[int] = set(orphans)
    dropped: list[str] = []
    for index, ids in answered.items():
        calls = events[index]["message"].get("tool_calls") or []
        missing = [c for c in calls if str(c.get("id")) not in ids]
        if not missing:
            continue
        partial = [i for i, o in owner.items() if o == index]
        drop.add(index)
        drop.update(partial)
        names = ", ".join(str(c.get("name")) for c in missing)
        dropped.append(f"dropped turn {events[index].get('turn')} (the model's answer at {float(events[index].get('t') or 0.0):.1f} s): "
                       f"the episode stopped while its tool calls ran ({len(missing)} of {len(calls)} without a "
                       f"result: {names}), so its assistant message and {len(partial)} tool result(s) were "
                       "left out and the model redoes the turn")
    if orphans:
        dropped.append(f"left out {len(orphans)} tool result(s) that answer no tool call of the assistant "
                       "message before them")
    return [e for i, e in enumerate(events) if i not in drop], dropped


def _is_assistant(event: dict[str, Any]) -> bool:
    message = event.get("message")
    return isinstance(message, dict) and message.get("role") == "assistant"


def _call_ids(event: dict[str, Any]) -> set[str]:
    return {str(c.get("id")) for c in event["message"].get("tool_calls") or [] if isinstance(c, dict)}
