"""The sandbox as TRL's environment: one ``KernelEnv`` per rollout, its tools as methods.

TRL's ``GRPOTrainer(environment_factory=...)`` makes one instance per concurrent rollout, calls
``reset(**row)`` before each, exposes every public method as a tool (schemas from the signatures
and docstrings) and calls ``get_reward()`` when the rollout ends. Each method forwards to the same
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
from .rows import task_of_row

_log_lock = threading.Lock()


class KernelToolEnv:
    """One rollout's workspace. Build instances with ``environment_factory``."""

    def __init__(self, pool: Any, root: Path, log_path: Path | None = None) -> None:
        self._env = KernelEnv(pool, Path(root) / uuid.uuid4().hex[:12])
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

    async def bash(self, command: str, timeout_s: float | None = None) -> str:
        """Run one shell command in the workspace (sandboxed, fresh shell each time).

        Args:
            command: The command line to run.
            timeout_s: Seconds before the command is stopped.
        """
        return await self._call("bash", command=command, timeout_s=timeout_s)

    async def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read a file of the workspace, with line numbers.

        Args:
            path: The file, relative to the workspace.
            offset: The first line to show (1-based).
            limit: How many lines to show.
        """
        return await self._call("read", path=path, offset=offset, limit=limit)

    async def write(self, path: str, content: str) -> str:
        """Create or replace a file (an existing file must be read first).

        Args:
            path: The file, relative to the workspace.
            content: The whole new content.
        """
        return await self._call("write", path=path, content=content)

    async def edit(self, path: str, old_string: str, new_string: str, replace_all: bool | None = None) -> str:
        """Replace an exact string in a file.

        Args:
            path: The file, relative to the workspace.
            old_string: The text to replace; it must occur once unless replace_all is set.
            new_string: The replacement.
            replace_all: Replace every occurrence.
        """
        return await self._call("edit", path=path, old_string=old_string, new_string=new_string,
                                replace_all=replace_all)

    async def multi_edit(self, path: str, edits: list) -> str:
        """Apply several exact-string edits to one file, all or none.

        Args:
            path: The file, relative to the workspace.
            edits: Objects with old_string, new_string and optionally replace_all, applied in order.
        """
        return await self._call("multi_edit", path=path, edits=edits)

    async def glob(self, pattern: str, path: str | None = None) -> str:
        """List the workspace files that match a glob pattern.

        Args:
            pattern: A glob such as kernels/*.cpp or **/*.py.
            path: The folder to search in.
        """
        return await self._call("glob", pattern=pattern, path=path)

    async def grep(self, pattern: str, path: str | None = None, glob: str | None = None,
                   ignore_case: bool | None = None, context: int | None = None) -> str:
        """Search the workspace's files for a regular expression.

        Args:
            pattern: The regular expression.
            path: A file or folder to search.
            glob: Only files matching this glob.
            ignore_case: Match regardless of case.
            context: Lines of context around each match.
        """
        return await self._call("grep", pattern=pattern, path=path, glob=glob, ignore_case=ignore_case,
                                context=context)

    async def compile(self) -> str:
        """Build the solution with the judge's flags and check its sources against the rules."""
        return await self._call("compile")

    async def verify(self) -> str:
        """Check ModelNew against the reference on fresh random inputs and weights."""
        return await self._call("verify")

    async def profile(self) -> str:
        """Verify, then time the solution against eager PyTorch and torch.compile and give the reward."""
        return await self._call("profile")

    async def finish(self, summary: str | None = None) -> str:
        """End the episode; the best correct solution judged in it counts.

        Args:
            summary: What was done, briefly.
        """
        return await self._call("finish", summary=summary)


def environment_factory(pool: Any, root: Path, log_path: Path | None = None) -> Callable[[], KernelToolEnv]:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)

    def make() -> KernelToolEnv:
        return KernelToolEnv(pool, root, log_path)

    return make
