"""The server's tools. Every tool but ``open_task`` works in one session, named by its ``session``
argument, and most are the agent's own tools (``KernelEnv.call_tool``) under the names MCP
clients expect, with the same argument schemas and the same checks: paths stay inside the
workspace, the task and the judge's files stay read-only, and compile, verify, profile and judge
run the candidate only in the judge.

A tool is a ``ServerTool``: a name, a description, a JSON schema and an async handler from the
``SessionStore`` and the checked arguments to a ``ToolResult``. ``server_tools()`` is the list
the server serves; to add one, build a ``ServerTool`` (``session_tool`` for one that works in a
session) and append it there.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Awaitable, Callable

from ..agent.env import EnvSettings
from ..agent.prompt import task_prompt
from ..agent.tools import ToolBox, ToolError, ToolOutput, default_tools
from ..judge.roofline import render as render_roofline
from ..workspace import SKILL_FILE
from .sessions import Session, SessionStore

GUIDE = """\
# Working through this server

Every tool but open_task takes `session`: the id `{session}`. Paths are relative to the workspace.

- `list_files`, `read_file` and `write_file` work on the workspace's files. Read an existing file
  before replacing it; model.py, SKILL.md and the binding files are read-only.
- `compile` builds the kernels with the judge's flags and rules; `verify` checks ModelNew against
  the reference on fresh random inputs and weights; `profile` also times it against eager PyTorch
  and torch.compile and gives the reward. `judge` does what profile does and returns the whole
  verdict as JSON: status, correct, reward, speed-ups, timings, each violation with its rule, and
  the feedback. Where SKILL.md says `cuda-agent compile`, `verify` or `profile`, call these tools.
- `roofline` says where the last timed solution stands against the GPU's peaks (memory- or
  compute-bound, fractions of peak, fraction of the roofline reached).
- `close_task` ends the session; the best correct solution judged is kept on the server.
"""
CLOSING = "Call `judge` for the final verdict, then `close_task`."


@dataclass(frozen=True)
class ToolResult:
    """What a tool gives back: ``text`` for the model, ``data`` as structured content, and
    ``is_error`` when the call did not do what was asked."""

    text: str
    data: dict[str, Any] | None = None
    is_error: bool = False


Handler = Callable[[SessionStore, dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ServerTool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Handler
    read_only: bool = False   # changes nothing: clients may run it without asking
    judges: bool = False      # waits for the judge: the server reports progress meanwhile
    agent_name: str = ""      # the agent's tool it serves, if any


SESSION_ARG = {"type": "string", "description": "The session id that open_task returned."}


def session_tool(name: str, description: str, parameters: dict[str, Any],
                 run: Callable[[Session, dict[str, Any]], Awaitable[ToolResult]], **flags: Any) -> ServerTool:
    """A tool working in one session: ``parameters`` gain a required ``session`` argument, and
    ``run`` gets the open session and the other arguments."""
    schema = copy.deepcopy(parameters)
    schema["properties"] = {"session": SESSION_ARG, **schema.get("properties", {})}
    schema["required"] = ["session", *schema.get("required", [])]

    async def handler(store: SessionStore, args: dict[str, Any]) -> ToolResult:
        args = dict(args)
        session = store.get(args.pop("session"))
        return await run(session, args)

    return ServerTool(name, description, schema, handler, **flags)


@cache
def agent_tools() -> ToolBox:
    """The agent's tools as every session's KernelEnv has them: the source of the schemas here."""
    return ToolBox(default_tools(EnvSettings().tool_limits))


def agent_tool(name: str, agent_name: str, description: str, *, defaults: dict[str, Any] | None = None,
               judge_verdict: bool = False, **flags: Any) -> ServerTool:
    """The agent's tool ``agent_name`` as ``name``: its schema, run by the session's KernelEnv.
    ``defaults`` become optional arguments. ``judge_verdict`` returns the judge's whole verdict
    as the result (``judge``) instead of the tool's report."""
    parameters = copy.deepcopy(agent_tools().tools[agent_name].parameters)
    for key, value in (defaults or {}).items():
        parameters["properties"][key] = {**parameters["properties"][key], "default": value}
        parameters["required"] = [r for r in parameters.get("required", []) if r != key]

    async def run(session: Session, args: dict[str, Any]) -> ToolResult:
        record = await session.env.call_tool(agent_name, json.dumps({**(defaults or {}), **args}))
        if (record.output.verdict or {}).get("roofline"):  # for the roofline tool, kept with the session
            session.record["roofline"] = record.output.verdict["roofline"]
            session.save()
        if judge_verdict:
            return _verdict_result(record.output)
        return ToolResult(record.output.text, record.output.verdict, record.output.is_error)

    return session_tool(name, description, parameters, run, agent_name=agent_name, **flags)


def _verdict_result(output: ToolOutput) -> ToolResult:
    # A verdict is the judge's answer, refusals included: only no verdict at all is an error.
    if output.verdict is None:
        return ToolResult(output.text, None, True)
    return ToolResult(json.dumps(output.verdict, indent=1, default=str), output.verdict, False)


async def _roofline(session: Session, args: dict[str, Any]) -> ToolResult:
    roof = session.record.get("roofline")
    if not roof:
        return ToolResult("no roofline yet: it comes from a timed verdict; call profile or judge first", None, True)
    return ToolResult("\n".join(render_roofline(roof)), roof, False)


ROOFLINE = session_tool(
    "roofline",
    "Where the last timed solution (profile or judge) stands against the GPU's peaks: the task's FLOPs and "
    "the bytes it must move, memory- or compute-bound, and for the solution, eager and torch.compile the "
    "achieved bandwidth and FLOP/s as fractions of peak and the fraction of the roofline reached. On the CPU "
    "backend it says that no roofline is drawn.", {"type": "object", "properties": {}}, _roofline, read_only=True)


# -- open_task and close_task -----------------------------------------------------------------
async def open_task(store: SessionStore, args: dict[str, Any]) -> ToolResult:
    task, resume = args.get("task"), args.get("resume")
    if (task is None) == (resume is None):
        raise ToolError("give either task (to open a new session) or resume (the id of an earlier "
                        "session), not both or neither")
    session = await store.open(task) if task is not None else store.resume(resume)
    env = session.env
    skill = (session.workspace / SKILL_FILE).read_text()
    opening = "Resumed" if resume is not None else "Opened"
    text = "\n\n".join([
        f"{opening} session `{session.id}` (task {env.task.name}, {store.judge.backend} backend); "
        f"its workspace is {session.workspace}.",
        task_prompt(env.task, store.judge.backend, closing=CLOSING),
        GUIDE.format(session=session.id),
        f"# {SKILL_FILE} (the workspace's rules and workflow)\n\n{skill.rstrip()}",
    ])
    return ToolResult(text, session.summary())


OPEN_TASK = ServerTool(
    "open_task",
    "Open a task in a new workspace, or resume an earlier session. task: a KernelBench-format "
    "Python file on the server (class Model, get_inputs, get_init_inputs), a dataset row "
    "(tasks.parquet#17, JSONL too) or a KernelBench problem as LEVEL/ID (1/19; needs the "
    "server's --kernelbench). resume: the id of an earlier session, also after a restart of the "
    "server. Returns the session id that every other tool takes, the workspace, the task and the "
    "rules the judge enforces (SKILL.md).",
    {"type": "object",
     "properties": {"task": {"type": "string", "description": "The task to open: a file, PATH#ROW or LEVEL/ID."},
                    "resume": {"type": "string", "description": "The id of a session to resume."}},
     "additionalProperties": False},
    open_task,
)


async def close_task(store: SessionStore, args: dict[str, Any]) -> ToolResult:
    summary = store.close(args["session"], delete=bool(args.get("delete")))
    if summary["deleted"]:
        text = f"Session {summary['session']} closed and its workspace deleted."
    else:
        text = (f"Session {summary['session']} closed; its workspace stays at {summary['workspace']} "
                f"(open_task with resume={summary['session']!r} reopens it).")
    best = summary.get("best")
    if best:
        text += f" Best correct solution: reward {best['reward']} (from {best['stage']})"
        text += f", kept in {summary['best_dir']}." if summary.get("best_dir") else "."
    else:
        text += " No correct solution was judged."
    return ToolResult(text, summary)


CLOSE_TASK = ServerTool(
    "close_task",
    "End a session. Its workspace and the best correct solution judged stay on the server (for "
    "open_task's resume) unless delete is true.",
    {"type": "object",
     "properties": {"session": SESSION_ARG,
                    "delete": {"type": "boolean", "default": False,
                               "description": "Also delete the workspace and everything kept for it."}},
     "required": ["session"], "additionalProperties": False},
    close_task,
)


def server_tools() -> list[ServerTool]:
    """The tools the server serves, in the order clients list them."""
    return [
        OPEN_TASK,
        agent_tool("list_files", "glob",
                   "List the workspace's files whose path matches a glob pattern (default: every file), "
                   "newest first. `*` matches within one directory level, `**` any number of levels.",
                   defaults={"pattern": "**/*"}, read_only=True),
        agent_tool("read_file", "read",
                   "Read a text file of the workspace. Lines come numbered like `cat -n` (the numbers "
                   "are not part of the file); give offset (1-based) and limit to read part of a long "
                   "file. A file must be read before write_file may replace it.", read_only=True),
        agent_tool("write_file", "write",
                   "Write a whole text file in the workspace, creating it and its directories or "
                   "replacing it (an existing file only after read_file). Kernels go in kernels/, "
                   "ModelNew in model_new.py; model.py, SKILL.md and the binding files are read-only."),
        agent_tool("compile", "compile", agent_tools().tools["compile"].description, judges=True),
        agent_tool("verify", "verify", agent_tools().tools["verify"].description, judges=True),
        agent_tool("profile", "profile", agent_tools().tools["profile"].description, judges=True),
        agent_tool("judge", "profile",
                   "Judge the workspace's solution in full, as `cuda-agent judge --json` does: build, "
                   "check against the reference on fresh inputs, time against eager and torch.compile. "
                   "Returns the verdict as JSON: status (ok, compile_error, forbidden, runtime_error, "
                   "timeout, incorrect), correct, reward (-1, 1, 2, 3), speed-ups, timings, violations "
                   "(each with the rule it broke, file and line) and feedback.",
                   judge_verdict=True, judges=True),
        ROOFLINE,
        CLOSE_TASK,
    ]
