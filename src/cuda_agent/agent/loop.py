"""One episode of the agent: a ReAct loop of model turns and tool calls in a workspace.

Each turn sends the conversation to the model, runs the tool calls it asks for (in order), and
feeds the results back. The episode stops when the model calls ``finish``, when a budget runs out
(turns, wall time, context), when the model keeps failing (replies without a tool call, or turns
in which every call fails), or when the model refuses the request. Everything is appended to the
episode's trajectory as it happens, so an interrupted episode resumes from its file (as does one
whose model was unreachable after every retry), and the best correct solution is exported the
moment the judge finds it. A lock keeps two runs from working on one episode at once.

An episode's directory::

    DIR/trajectory.jsonl   every message, tool call, result, verdict and token count
    DIR/workspace/         the agent's workspace (model.py, model_new.py, kernels/, SKILL.md)
    DIR/scratch/           bash's HOME and TMPDIR
    DIR/best/              the best correct solution so far, with its verdict.json
    DIR/result.json        the episode's summary, once it has ended
    DIR/.lock              held while a run works on the episode
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..device import DeviceInfo
from ..errors import CudaAgentError
from ..files import write_atomic
from ..judge.pools import JudgePool
from ..task import Task
from .best import BestSolution, export_solution
from .context import ContextBudget
from .env import CUT_OFF, NUDGE, EnvSettings, KernelEnv, ToolRecord
from ..llm.base import ContextOverflowError, LLMClient, LLMError
from ..llm.messages import Message, Usage, estimate_tokens
from .trajectory import TrajectoryWriter, load_trajectory, resume_state

TRAJECTORY_FILE = "trajectory.jsonl"
STAGING_TRAJECTORY = "trajectory.jsonl.new"
RESULT_FILE = "result.json"
LOCK_FILE = ".lock"
BEST_DIR = "best"
START_ARTEFACTS = frozenset({"workspace", "scratch", STAGING_TRAJECTORY})
__all__ = ["CUT_OFF", "NUDGE", "AgentSettings", "Episode", "EpisodeError", "EpisodeResult", "EpisodeStatus"]


@dataclass
class AgentSettings:
    """An episode's settings: the environment's limits (turns, wall time, idle and failing turns,
    the tools' own limits) and the model's context window. A tool result is cut to the context's
    ``max_tool_tokens``; the environment's own character cap is set from it."""

    env: EnvSettings = field(default_factory=EnvSettings)
    context: ContextBudget = field(default_factory=ContextBudget)

    def to_dict(self) -> dict[str, Any]:
        """The settings as the episode applies them (the environment's tool cap from the context)."""
        return {"env": asdict(self.env_settings()), "context": asdict(self.context)}

    def env_settings(self) -> EnvSettings:
        """The environment's settings, its tool results cut where the context's budget says."""
        return replace(self.env, max_tool_chars=self.context.max_tool_chars)


@dataclass
class EpisodeStatus:
    """What the live progress view shows for an episode."""

    episode_id: str
    task: str
    turn: int = 0
    last_verdict: str = ""
    best_speedup: float | None = None
    stop_reason: str | None = None
    tokens: int = 0


@dataclass
class EpisodeResult:
    episode_id: str
    task: str
    stop_reason: str
    turns: int
    elapsed_s: float
    usage: Usage
    best: dict[str, Any] | None
    directory: Path
    overhead_ms: list[float] = field(default_factory=list)  # per turn: all but the model and the judge
    error: str = ""

    @property
    def best_dir(self) -> Path | None:
        return self.directory / BEST_DIR if self.best else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["directory"] = str(self.directory)
        data["best_dir"] = str(self.best_dir) if self.best_dir else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EpisodeResult":
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["usage"] = Usage(**fields.get("usage", {}))
        fields["directory"] = Path(fields["directory"])
        return cls(**fields)


class EpisodeError(CudaAgentError):
    """An episode cannot start or resume (its directory is not what it should be)."""


def brief_verdict(verdict: dict[str, Any]) -> str:
    """A verdict in a few words for the live table (``profile correct 2.31x vs compile``)."""
    stage, status = verdict.get("stage", ""), verdict.get("status", "")
    if status != "ok":
        return f"{stage} {status}"
    if stage == "compile":
        return "compile ok"
    if not verdict.get("correct"):
        return f"{stage} incorrect"
    speedup = verdict.get("speedup_vs_compile")
    return f"{stage} correct" + (f" {speedup:.2f}x vs compile" if speedup is not None else "")


class Episode:
    """One task, one model, one workspace. ``run`` starts it, or resumes it from its trajectory.

    The workspace, the tools and the budgets are the ``KernelEnv``'s; the episode adds the model,
    the context window, the trajectory file, resuming and the exported best solution.
    """

    def __init__(self, task: Task, client: LLMClient, judge: JudgePool, directory: Path, *,
                 settings: AgentSettings | None = None, provider: str = "openai",
                 device: DeviceInfo | None = None, episode_id: str | None = None,
                 hidden: list[Path] | None = None, on_status: Callable[[EpisodeStatus], None] | None = None):
        self.task, self.client, self.judge = task, client, judge
        self.directory = Path(directory).resolve()
        self.settings = settings or AgentSettings()
        self.provider, self.device = provider, device
        self.episode_id = episode_id or uuid.uuid4().hex[:12]
        self.on_status = on_status or (lambda status: None)
        # bash may not read the trajectory, the exported best, or the judge's cache (the env hides both).
        self.env = KernelEnv(judge, self.directory, settings=self.settings.env_settings(), device=device,
                             hidden=hidden, on_tool=self._record_tool, on_best=self._new_best, clock=self._now)
        self.schema_tokens = estimate_tokens(json.dumps(self.env.schemas()))
        self.budget = self.settings.context
        self.status = EpisodeStatus(self.episode_id, task.name)
        # Set by _start or _resume.
        self.messages: list[Message] = []
        self.turn = 0
        self.usage = Usage()
        self.elapsed_before = 0.0
        self.known: tuple[int, Usage] | None = None
        self.overhead_ms: list[float] = []
        self._started = 0.0
        self._writer: TrajectoryWriter | None = None
        self._lock_handle = None

    # -- paths ----------------------------------------------------------------------------------
    @property
    def trajectory_path(self) -> Path:
        return self.directory / TRAJECTORY_FILE

    @property
    def workspace(self) -> Path:
        return self.env.workspace

    @property
    def best(self) -> BestSolution | None:
        return self.env.best

    def _now(self) -> float:
        return self.elapsed_before + time.monotonic() - self._started

    def _emit(self, event: dict[str, Any]) -> None:
        event.setdefault("t", round(self._now(), 4))
        assert self._writer is not None
        self._writer.write(event)

    def _note(self, kind: str, text: str) -> None:
        self._emit({"type": "note", "turn": self.turn, "kind": kind, "text": text})

    # -- start and resume -----------------------------------------------------------------------
    def _lock(self) -> None:
        """Hold the episode's lock for the whole run: two runs appending to one trajectory and
        editing one workspace would corrupt both."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = open(self.directory / LOCK_FILE, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise EpisodeError(f"{self.directory} is in use by another run of this episode; wait for it, "
                               "or choose another output directory") from None
        self._lock_handle = handle

    def _unlock(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()  # closing releases the lock
            self._lock_handle = None

    def _start(self) -> None:
        """A new episode. The trajectory appears only once its header and opening messages are
        written, so a crash before then leaves nothing that looks resumable."""
        leftovers = {p.name for p in self.directory.iterdir()} - {LOCK_FILE}
        if leftovers - START_ARTEFACTS:
            raise EpisodeError(f"{self.directory} is not empty and holds no trajectory to resume; "
                               "choose a new output directory")
        for name in leftovers:  # a start that crashed half-way
            path = self.directory / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        opening, _ = self.env.reset(self.task)
        staging = self.directory / STAGING_TRAJECTORY
        self._writer = TrajectoryWriter(staging)
        self._emit({"type": "header", "version": 1, "episode_id": self.episode_id,
                    "task": {"name": self.task.name, "sha256": self.task.sha256, "source": self.task.source},
                    "model": self.client.model, "provider": self.provider, "backend": self.judge.backend,
                    "settings": self.settings.to_dict(),
                    "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        for message in opening:
            self._append(message)
        self._writer.close()
        os.replace(staging, self.trajectory_path)
        self._writer = TrajectoryWriter(self.trajectory_path)

    def _resume(self) -> EpisodeResult | None:
        trajectory = load_trajectory(self.trajectory_path)
        header = trajectory.header
        self.episode_id = self.status.episode_id = header.get("episode_id", self.episode_id)
        if trajectory.end is not None:
            result_file = self.directory / RESULT_FILE
            if result_file.is_file():
                return EpisodeResult.from_dict(json.loads(result_file.read_text()))
            return self._result_from(trajectory.end, trajectory.best)
        if header["task"]["sha256"] != self.task.sha256:
            raise EpisodeError(f"{self.trajectory_path} is an episode of task {header['task']['name']!r}, "
                               f"not of {self.task.name!r}; use a new output directory")
        if not self.workspace.is_dir():
            raise EpisodeError(f"cannot resume {self.trajectory_path}: its workspace {self.workspace} is gone")
        state = resume_state(trajectory)
        self.messages, self.turn = state.messages, state.turn
        self.usage, self.elapsed_before = state.usage, state.elapsed_s
        best = BestSolution.from_event(state.best) if state.best else None
        self.env.restore(self.task, turn=self.turn, best=best)
        if self.best is not None and not (self.directory / BEST_DIR).is_dir():
            export_solution(self.best, self.directory / BEST_DIR)  # lost to a crash mid-export
        self.status.turn = self.turn
        self.status.best_speedup = self.best.speedup_vs_compile if self.best else None
        self._writer = TrajectoryWriter(self.trajectory_path)
        self._note("resumed", state.describe())
        return None

    # -- the loop -------------------------------------------------------------------------------
    async def run(self) -> EpisodeResult:
        self._started = time.monotonic()
        self._lock()
        try:
            if self.trajectory_path.is_file():
                done = self._resume()
                if done is not None:
                    return done
            else:
                self._start()
            stop, error = "", ""
            try:
                while not stop:
                    stop, error = await self._turn()
            except BaseException:  # cancelled or crashed: the trajectory stays resumable
                self._writer.close()
                raise
            return self._finish(stop, error)
        finally:
            self._unlock()

    def _fit_context(self) -> bool:
        """Elide old tool output until the next request fits; False if it cannot."""
        estimate = self.budget.estimate(self.messages, self.known, self.schema_tokens)
        if estimate <= self.budget.limit:
            return True
        freed = self.budget.elide(self.messages, estimate - self.budget.limit)
        self.known = self.budget.after_elision(self.known, freed)
        estimate = self.budget.estimate(self.messages, self.known, self.schema_tokens)
        self._note("context_elided", f"elided {len(freed)} old tool output(s) ({sum(freed.values())} tokens) "
                                     f"to fit the context; the request is now about {estimate} tokens")
        return estimate <= self.budget.limit

    async def _complete(self):
        schemas = self.env.schemas()
        try:
            return await self.client.complete(self.messages, schemas)
        except ContextOverflowError as exc:
            # The model counts differently from our estimate: elide everything but the last turn.
            freed = self.budget.elide(self.messages, 1 << 62, keep_recent=2)
            self.known = self.budget.after_elision(self.known, freed)
            self._note("context_elided", f"the model rejected the request as too long ({exc}); elided "
                                         f"{len(freed)} old tool output(s) ({sum(freed.values())} tokens) and retried")
            if not freed:
                raise
            return await self.client.complete(self.messages, schemas)

    async def _turn(self) -> tuple[str, str]:
        if stop := self.env.budget_left():
            return stop, ""
        if not self._fit_context():
            return "context_exhausted", ""
        self.turn += 1
        turn_started = time.monotonic()
        try:
            # The wall-time budget also bounds a model that answers slowly or keeps being retried.
            completion = await asyncio.wait_for(self._complete(), max(1.0, self.env.seconds_left()))
        except asyncio.TimeoutError:
            self.turn -= 1
            return "max_wall_time", ""
        except ContextOverflowError as exc:
            return "context_exhausted", str(exc)
        except LLMError as exc:
            self.turn -= 1  # the turn never happened; a resumed episode redoes it
            return ("llm_unavailable" if exc.transient else "llm_error"), str(exc)
        self.usage = self.usage + completion.usage
        reply = completion.message
        self._append(reply, completion)
        self.known = (len(self.messages), completion.usage) if completion.usage.input_tokens else None
        self.status.turn, self.status.tokens = self.turn, self.usage.input_tokens + self.usage.output_tokens

        step = await self.env.step(reply, cut_off=completion.finish_reason == "length")
        for message in step.observation:
            if message.role != "tool":  # tool results were recorded as each call finished
                self._append(message)
        external_s = completion.latency_s + step.info["external_s"]
        self.overhead_ms.append(1000 * max(0.0, time.monotonic() - turn_started - external_s))
        self.on_status(self.status)
        return step.info["stop_reason"], ""

    def _record_tool(self, record: ToolRecord) -> None:
        """The environment ran a call: the model will see its result, and the trajectory has it now."""
        self.messages.append(record.message)
        data = {**record.output.data, **({"chars_cut": record.chars_cut} if record.chars_cut else {})}
        self._emit({"type": "tool", "turn": self.turn, "call": asdict(record.call),
                    "message": record.message.to_dict(), "is_error": record.output.is_error,
                    "duration_s": round(record.seconds, 4), "verdict": record.output.verdict, "data": data})
        if record.output.verdict is not None:
            self.status.last_verdict = brief_verdict(record.output.verdict)

    def _new_best(self, best: BestSolution) -> None:
        export_solution(best, self.directory / BEST_DIR)
        self._emit({"turn": self.turn, **best.event()})
        self.status.best_speedup = best.speedup_vs_compile

    def _append(self, message: Message, completion=None) -> None:
        self.messages.append(message)
        event: dict[str, Any] = {"type": "message", "turn": self.turn, "message": message.to_dict(),
                                 "usage": None, "latency_s": None, "retries": 0, "finish_reason": None}
        if completion is not None:
            event.update(usage=asdict(completion.usage), latency_s=round(completion.latency_s, 4),
                         retries=completion.retries, finish_reason=completion.finish_reason)
        self._emit(event)

    # -- the end --------------------------------------------------------------------------------
    def _result_from(self, end: dict[str, Any], best: dict[str, Any] | None) -> EpisodeResult:
        return EpisodeResult(self.episode_id, self.task.name, end["stop_reason"], end["turn"], end["elapsed_s"],
                             Usage(**end.get("usage", {})), end.get("best"), self.directory,
                             error=end.get("error", ""))

    def _finish(self, stop: str, error: str) -> EpisodeResult:
        best = self.best.summary() if self.best else None
        result = EpisodeResult(self.episode_id, self.task.name, stop, self.turn, round(self._now(), 3), self.usage,
                               best, self.directory, [round(x, 3) for x in self.overhead_ms], error)
        if stop == "llm_unavailable":
            # The model's service is down, not the episode: leave it open so a rerun resumes it.
            self._note("llm_unavailable", error)
        else:
            end = {"type": "end", "turn": self.turn, "stop_reason": stop, "elapsed_s": result.elapsed_s,
                   "usage": asdict(self.usage), "best": best}
            if error:
                end["error"] = error
            self._emit(end)
            write_atomic(self.directory / RESULT_FILE, json.dumps(result.to_dict(), indent=2))
        self._writer.close()
        self.status.stop_reason = stop
        self.on_status(self.status)
        return result
