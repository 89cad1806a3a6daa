"""The agent's environment: one task's workspace, the tools that act in it, and the judge behind them.

Shaped like a Gymnasium environment, so every driver uses the same tools the same way: the agent's
ReAct loop (``loop.Episode``), verl's agent loop and TRL's multi-turn GRPO (``cuda_agent.train``).

* ``reset(task, seed)`` makes a fresh workspace for the task and returns the opening messages
  (SKILL.md as the system prompt, the task as the first request) and an info dict with the tool
  schemas.
* ``step(action)`` takes the model's reply (an assistant ``Message``), runs its tool calls in
  order and returns a ``Step``: the observation (the tool results, or a nudge when the reply
  called no tool), the reward, ``terminated`` (the task ended: the model called ``finish``, or
  kept replying without a tool call, or kept failing) and ``truncated`` (a budget ran out: turns
  or wall time), apart, as Gymnasium has them.

The reward is the outcome reward: 0 until the episode ends, then the reward of the best correct
solution the judge found in it (the paper's evaluation takes the best solution of a trajectory),
-1 when there is none. ``reward_kind="continuous"`` gives the ablation's t_compile / t instead, and
``reward_kind="sol"`` the SOL score against torch.compile (``judge.reward.sol_reward``).

The environment has no randomness of its own (the judge draws its own secret seeds), so the seed
of ``reset`` is only recorded in the info dict, as Gymnasium allows.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import paper
from ..device import DeviceInfo
from ..judge.pools import JudgePool
from ..task import Task
from ..workspace import SKILL_FILE, create_workspace
from .best import BestSolution, better, candidate_from_verdict
from ..llm.messages import Message, ToolCall
from .prompt import opening_messages
from .text import cap_text
from .tools import ToolBox, default_tools, protected_files
from .tools.base import ToolContext, ToolLimits, ToolOutput

JUDGE_TOOLS = frozenset({"compile", "verify", "profile"})
NUDGE = ("No tool was called. Continue by calling a tool (compile, verify and profile run the judge), "
         "or call `finish` if you are done.")
CUT_OFF = "Your reply was cut off by the output limit. Keep replies shorter, and write large files in parts."
# Each reward kind and the verdict field it pays: the paper's milestones (Eq. 1), the ablation's
# t_compile / t, and the SOL score against torch.compile (cuda only: the cpu backend draws no roofline).
REWARD_FIELDS = {"milestone": "reward", "continuous": "reward_continuous", "sol": "reward_sol"}
REWARD_KINDS = tuple(REWARD_FIELDS)
TERMINAL_REASONS = frozenset({"finished", "no_tool_calls", "repeated_failure"})
TRUNCATING_REASONS = frozenset({"max_turns", "max_wall_time"})


@dataclass
class EnvSettings:
    max_turns: int = paper.TRAINING_TURNS  # 200 at evaluation (paper.EVALUATION_TURNS)
    max_wall_s: float = 8 * 3600.0
    max_idle_turns: int = 3              # replies in a row without a tool call
    max_failed_turns: int = 8            # turns in a row in which every tool call failed
    max_tool_chars: int = 28_000         # one tool result as the model sees it, cut in the middle past this
    tool_limits: ToolLimits = field(default_factory=ToolLimits)


@dataclass
class ToolRecord:
    """One tool call as it ran: what the loop writes to the trajectory."""

    turn: int
    call: ToolCall
    output: ToolOutput
    message: Message       # the tool result the model is given (capped)
    seconds: float
    chars_cut: int = 0


@dataclass
class Step:
    observation: list[Message]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


class KernelEnv:
    """One task at a time in ``directory`` (``workspace/`` and ``scratch/`` are made there).

    ``judge`` is a ``judge.pools.JudgePool``. ``hidden`` are further paths bash may not read (the
    directory itself and the judge's cache always are). ``on_tool`` and ``on_best`` are called as
    each tool call finishes and as a better solution is found, so a driver can write its record
    as things happen. ``clock`` gives the seconds the episode has run (default: since ``reset``).
    """

    def __init__(self, judge: JudgePool, directory: Path | str | None = None, *, settings: EnvSettings | None = None,
                 device: DeviceInfo | None = None, hidden: list[Path] | None = None,
                 tools: ToolBox | None = None, reward_kind: str = "milestone",
                 on_tool: Callable[[ToolRecord], None] | None = None,
                 on_best: Callable[[BestSolution], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 tool_names: dict[str, str] | None = None) -> None:
        if reward_kind not in REWARD_KINDS:
            raise ValueError(f"reward_kind must be one of {', '.join(REWARD_KINDS)}, not {reward_kind!r}")
        self.judge = judge
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="cuda-agent-env-")).resolve()
        self.settings = settings or EnvSettings()
        self.device = device
        self.hidden = [self.directory, Path(judge.cache_dir)] + [Path(p) for p in hidden or []]
        self.toolbox = tools or ToolBox(default_tools(self.settings.tool_limits))
        self.reward_kind = reward_kind
        self.on_tool = on_tool or (lambda record: None)
        self.on_best = on_best or (lambda best: None)
        self._clock = clock
        self.tool_names = tool_names  # the tools' names as the caller knows them (ToolContext.tool_names)
        self._started = time.monotonic()
        self.task: Task | None = None
        self.context: ToolContext | None = None
        self.turn = 0
        self.best: BestSolution | None = None
        self.stop_reason = ""
        self.seed: int | None = None
        self._idle = self._failed = 0

    # -- paths ----------------------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        return self.directory / "workspace"

    @property
    def scratch(self) -> Path:
        return self.directory / "scratch"

    def schemas(self) -> list[dict[str, Any]]:
        return self.toolbox.schemas()

    def elapsed_s(self) -> float:
        return self._clock() if self._clock else time.monotonic() - self._started

    # -- starting -------------------------------------------------------------------------------
    def reset(self, task: Task, seed: int | None = None) -> tuple[list[Message], dict[str, Any]]:
        """A fresh workspace for ``task`` (replacing any earlier one) and the opening messages."""
        for path in (self.workspace, self.scratch):
            shutil.rmtree(path, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        create_workspace(task, self.workspace, self.judge.backend, self.device, cache_dir=self.judge.cache_dir)
        self._begin(task, turn=0, best=None)
        self.seed = seed
        skill = (self.workspace / SKILL_FILE).read_text()
        messages = opening_messages(task, self.judge.backend, skill)
        return messages, {"tools": self.schemas(), "seed": seed, "task": task.name, "workspace": str(self.workspace)}

    def restore(self, task: Task, *, turn: int, best: BestSolution | None, elapsed_s: float = 0.0) -> None:
        """Continue an episode over its existing workspace (a resumed trajectory)."""
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"cannot restore: the workspace {self.workspace} is gone")
        self._begin(task, turn=turn, best=best)
        self._started = time.monotonic() - elapsed_s

    def _begin(self, task: Task, *, turn: int, best: BestSolution | None) -> None:
        self.task, self.turn, self.best = task, turn, best
        self.stop_reason, self._idle, self._failed = "", 0, 0
        self._started = time.monotonic()
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.context = ToolContext(workspace=self.workspace, task=task, judge=self.judge, scratch=self.scratch,
                                   hidden=self.hidden, protected=protected_files(),
                                   limits=self.settings.tool_limits, tool_names=self.tool_names)

    # -- acting ---------------------------------------------------------------------------------
    def budget_left(self) -> str:
        """"" while another turn may start, else the budget that ran out ("max_turns", "max_wall_time")."""
        if self.turn >= self.settings.max_turns:
            return "max_turns"
        if self.elapsed_s() >= self.settings.max_wall_s:
            return "max_wall_time"
        return ""

    def seconds_left(self) -> float:
        return max(0.0, self.settings.max_wall_s - self.elapsed_s())

    async def step(self, action: Message, *, cut_off: bool = False) -> Step:
        """Run the reply's tool calls; ``cut_off`` says the reply hit the output limit, so its calls
        (whose arguments may be incomplete) are answered without being run."""
        if self.context is None:
            raise RuntimeError("call reset() before step()")
        if self.stop_reason:
            raise RuntimeError(f"the episode has ended ({self.stop_reason}); call reset() for a new one")
        self.turn += 1
        observation: list[Message] = []
        records: list[ToolRecord] = []
        stop = ""
        if not action.tool_calls:
            self._idle += 1
            observation.append(Message("user", CUT_OFF if cut_off else NUDGE))
            if self._idle >= self.settings.max_idle_turns:
                stop = "no_tool_calls"
        else:
            self._idle = 0
            all_failed = True
            for call in action.tool_calls:
                record = await self._run(call, CUT_OFF if cut_off else "")
                records.append(record)
                observation.append(record.message)
                all_failed = all_failed and record.output.is_error and call.name not in JUDGE_TOOLS
                if record.output.finished:
                    stop = "finished"
                    break
            self._failed = self._failed + 1 if all_failed else 0
            if not stop and self._failed >= self.settings.max_failed_turns:
                stop = "repeated_failure"
        stop = stop or self.budget_left()
        self.stop_reason = stop
        external = sum(r.seconds for r in records if r.call.name in JUDGE_TOOLS | {"bash"})
        info = {"stop_reason": stop, "records": records, "external_s": external,
                "best": self.best.summary() if self.best else None}
        reward = self.outcome_reward() if stop else 0.0
        return Step(observation, reward, stop in TERMINAL_REASONS, stop in TRUNCATING_REASONS, info)

    async def call_tool(self, name: str, arguments: str) -> ToolRecord:
        """One tool call outside a model reply (TRL exposes each tool as a method): it counts as
        part of the current turn and updates the best solution like any other call."""
        if self.context is None:
            raise RuntimeError("call reset() before call_tool()")
        return await self._run(ToolCall(f"call_{self.turn}_{name}", name, arguments), "")

    async def _run(self, call: ToolCall, not_run: str) -> ToolRecord:
        started = time.monotonic()
        if not_run:
            output = ToolOutput(f"not run: {not_run}", is_error=True, data={"not_run": True})
        else:
            output = await self.toolbox.call(call, self.context)
        seconds = 0.0 if not_run else time.monotonic() - started
        text = cap_text(output.text, self.settings.max_tool_chars)
        record = ToolRecord(self.turn, call, output, Message("tool", text, tool_call_id=call.id, name=call.name),
                            seconds, len(output.text) - len(text))
        self.on_tool(record)
        if output.verdict is not None and output.solution is not None:
            self._consider(output.verdict, output.solution)
        return record

    def _consider(self, verdict: dict[str, Any], solution: Any) -> None:
        candidate = candidate_from_verdict(verdict, solution, self.turn)
        if candidate is not None and better(candidate, self.best):
            self.best = candidate
            self.on_best(candidate)

    # -- the outcome ----------------------------------------------------------------------------
    def outcome_reward(self) -> float:
        """The episode's reward so far: the best correct solution's, -1 without one."""
        if self.best is None:
            return -1.0
        value = self.best.verdict.get(REWARD_FIELDS[self.reward_kind])
        return float(value) if value is not None else -1.0

    def close(self) -> None:
        """Remove the directory if the environment made it (a temporary one per rollout)."""
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "KernelEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
