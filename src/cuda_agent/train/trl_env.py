"""The sandbox as TRL's environment: one ``KernelEnv`` per rollout, its tools as methods.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per concurrent rollout, calls
``reset(**row)`` before each, exposes every public method as a tool (schemas from the signatures
and docstrings) and calls ``get_reward()`` when the rollout ends. The tool methods' docstrings are
written from the tools' own schemas (``rows.tool_schemas``, what RFT trains on), so that GRPO shows
the model the descriptions it was fine-tuned with. Each method forwards to the same
tool the agent loop runs, through ``KernelEnv.call_tool``, so the workspace rules, the sandboxed
shell and the judge are the agent's own. The reward is the episode's outcome (the best correct
solution's reward, -1 without one); each ended rollout is appended to an episodes log and its
workspace folder removed (TRL closes no environment, so nothing else would).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ..agent.env import KernelEnv
from ..judge.pools import JudgePool
from .rows import task_of_row, tool_schemas

_log_lock = threading.Lock()


class KernelToolEnv:
    """One rollout's workspace. Build instances with ``environment_factory``."""

    def __init__(self, pool: JudgePool, root: Path, log_path: Path | None = None,
                 reward_kind: str = "milestone") -> None:
        self._env = KernelEnv(pool, Path(root) / uuid.uuid4().hex[:12], reward_kind=reward_kind)
        self._log_path = log_path
        self._task_id = ""

    def reset(self, **row: Any) -> str | None:
        task = task_of_row({"ref_arch_src": row["ref_arch_src"], "task_id": row.get("task_id", "task")})
        self._env.reset(task)
        self._task_id = task.name
        return None  # the row's prompt already holds the task

    async def _call(self, name: str, **arguments: Any) -> str:
        args = {k: v for k, v in arguments.items() if v is not None}
        record = await self._env.call_tool(name, json.dumps(args))
        return record.message.content

    def get_reward(self) -> float:
        reward = self._env.outcome_reward()
        if self._log_path is not None:
            entry = {"task": self._task_id, "reward": reward, "time": time.time(),
                     "best": self._env.best.summary() if self._env.best else None}
            with _log_lock, open(self._log_path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")
        self._remove_workspace()  # the rollout has ended; the next reset makes a fresh one
        return reward

    def _remove_workspace(self) -> None:
        env = getattr(self, "_env", None)  # absent when __init__ failed
        if env is not None:
            shutil.rmtree(env.directory, ignore_errors=True)

    def __del__(self) -> None:
        self._remove_workspace()

    # The tool methods: their docstrings are the tools' own descriptions (_docstrings_from_tool_schemas).
    async def bash(self, command: str, timeout_s: float | None = None) -> str:
        return await self._call("bash", command=command, timeout_s=timeout_s)

    async def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        return await self._call("read", path=path, offset=offset, limit=limit)

    async def write(self, path: str, content: str) -> str:
        return await self._call("write", path=path, content=content)

    async def edit(self, path: str, old_string: str, new_string: str, replace_all: bool | None = None) -> str:
        return await self._call("edit", path=path, old_string=old_string, new_string=new_string,
                                replace_all=replace_all)

    async def multi_edit(self, path: str, edits: list) -> str:
        return await self._call("multi_edit", path=path, edits=edits)

    async def glob(self, pattern: str, path: str | None = None) -> str:
        return await self._call("glob", pattern=pattern, path=path)

    async def grep(self, pattern: str, path: str | None = None, glob: str | None = None,
                   ignore_case: bool | None = None, context: int | None = None) -> str:
        return await self._call("grep", pattern=pattern, path=path, glob=glob, ignore_case=ignore_case,
                                context=context)

    async def compile(self) -> str:
        return await self._call("compile")

    async def verify(self) -> str:
        return await self._call("verify")

    async def profile(self) -> str:
        return await self._call("profile")

    async def finish(self, summary: str | None = None) -> str:
        return await self._call("finish", summary=summary)


def _docstrings_from_tool_schemas() -> None:
    """Each tool method's docstring, in the Google style transformers' ``get_json_schema`` reads,
    from the schema of the tool of the same name: its description, and each parameter's."""
    for schema in tool_schemas():
        function = schema["function"]
        method = getattr(KernelToolEnv, function["name"])
        lines = [" ".join(function["description"].split())]
        parameters = function["parameters"].get("properties", {})
        if parameters:
            lines += ["", "Args:"]
            lines += [f"    {name}: {' '.join(spec.get('description', name).split())}" for name, spec in parameters.items()]
        method.__doc__ = "\n".join(lines)


_docstrings_from_tool_schemas()


def environment_factory(pool: JudgePool, root: Path, log_path: Path | None = None,
                        reward_kind: str = "milestone") -> Callable[[], KernelToolEnv]:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)

    def make() -> KernelToolEnv:
        return KernelToolEnv(pool, root, log_path, reward_kind)

    return make
