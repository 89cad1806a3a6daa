"""What a tool is, what it gets to work with, and what it returns to the loop."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...judge.pools import JudgePool
from ...task import Task
from ...llm.messages import tool_schema


@dataclass(frozen=True)
class ToolLimits:
    bash_timeout_s: float = 300.0      # one bash command, wall clock
    max_output_chars: int = 20_000     # a tool's text, before the loop's own context truncation
    max_read_lines: int = 2_000        # read: lines shown per call unless a range is asked for
    max_matches: int = 200             # glob and grep results per call


@dataclass
class ToolContext:
    """Everything a tool may touch for one episode.

    ``workspace`` is the agent's directory; every path argument is resolved inside it.
    ``protected`` are workspace-relative files the agent may read but never change.
    ``scratch`` is bash's private HOME and TMPDIR. ``hidden`` are paths bash may not read
    (the judge's cache, the episode's trajectory and outputs). ``judge`` is a
    ``judge.pools.JudgePool``. ``read_files`` remembers which files were read, since an existing file
    may only be overwritten after it was read.
    """

    workspace: Path
    task: Task
    judge: JudgePool
    scratch: Path
    hidden: list[Path] = field(default_factory=list)
    protected: frozenset[str] = frozenset()
    limits: ToolLimits = field(default_factory=ToolLimits)
    read_files: set[str] = field(default_factory=set)
    # The names the caller knows the tools by, where they are not the agent's own (the MCP server
    # serves read as read_file, and no edit or bash); None: the agent's names, every tool offered.
    tool_names: dict[str, str] | None = None

    def hint(self, tool: str, text: str) -> str:
        """``text`` with the caller's name for ``tool`` put in for ``{}``; "" where the caller has
        no such tool, so that no message sends it to a tool it cannot call."""
        name = tool if self.tool_names is None else self.tool_names.get(tool)
        return text.format(name) if name else ""


@dataclass
class ToolOutput:
    """A tool's result. ``text`` goes back to the model; the rest is for the loop and trajectory.

    ``verdict`` is the judge's verdict as a dict (compile, verify, profile); ``finished`` ends the
    episode (finish); ``data`` holds anything else worth recording (exit code, duration, ...) and
    must be plain JSON.
    """

    text: str
    is_error: bool = False
    verdict: dict[str, Any] | None = None
    finished: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    solution: Any = None  # the judged ``Solution`` (compile, verify, profile): the loop keeps the best


class ToolError(Exception):
    """A tool call the model got wrong; the message goes back to it as an error result."""


class Tool(ABC):
    name: str
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        return tool_schema(self.name, self.description, self.parameters)

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Do the call; raise ToolError for the model's mistakes (bad path, no match, ...)."""
