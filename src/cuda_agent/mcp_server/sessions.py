"""Sessions: one task's workspace each, kept on disk under the server's root so they outlive it.

``ROOT/<id>/`` holds ``workspace/`` (the client's files), ``scratch/``, ``best/`` (the best
correct solution judged so far, with its verdict, written the moment it is found) and
``session.json`` (the session's facts). Each live session is a ``KernelEnv`` over that
directory, so the server's tools are the agent's own tools, on the shared judge pool. The task is
looked up from the workspace registry in the judge's cache, never from a file the client can
write; a session not in memory (after a restart) is restored from disk on first use.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.best import VERDICT_FILE, BestSolution, export_solution
from ..agent.env import KernelEnv
from ..agent.runner import slug
from ..agent.tools.base import ToolError
from ..device import DeviceInfo
from ..files import write_atomic
from ..judge.pools import JudgePool
from ..workspace import WorkspaceError, find_workspace, record_path
from .tasks import resolve_task

SESSION_FILE = "session.json"
BEST_DIR = "best"
RECORD_VERSION = 1
SESSION_ID = re.compile(r"(?!\.)[A-Za-z0-9_.-]{1,100}")  # one path component, never . or ..


def default_root() -> Path:
    """``$XDG_DATA_HOME/cuda-agent/mcp``, else ``~/.local/share/cuda-agent/mcp``: a client's work,
    not a cache, and not relative to a working directory that a desktop client chooses."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "cuda-agent" / "mcp"


@dataclass
class Session:
    id: str
    directory: Path
    env: KernelEnv
    record: dict[str, Any]

    @property
    def workspace(self) -> Path:
        return self.env.workspace

    def summary(self) -> dict[str, Any]:
        return {"session": self.id, "workspace": str(self.workspace), "task": self.record["task"],
                "origin": self.record["origin"], "backend": self.record["backend"], "best": self.record["best"]}

    def save(self) -> None:
        self.record["updated"] = _now()
        write_atomic(self.directory / SESSION_FILE, json.dumps(self.record, indent=1, default=str))


class SessionStore:
    """The sessions under ``root``, all judged by one ``judge`` pool (a ``judge.pools.JudgePool``)."""

    def __init__(self, root: Path, judge: JudgePool, device: DeviceInfo | None = None,
                 kernelbench: Path | None = None, task_dirs: list[Path] | None = None) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.judge = judge
        self.device = device
        self.kernelbench = kernelbench
        self.task_dirs = task_dirs  # where task files may come from; None: anywhere (tasks.resolve_task)
        self.tool_names: dict[str, str] | None = None  # the agent's tools as served (set by the server)
        self._live: dict[str, Session] = {}

    async def open(self, spec: str) -> Session:
        """A new session with a fresh workspace for the task ``spec`` names."""
        task = await asyncio.to_thread(resolve_task, spec, untrusted=[self.root, Path(self.judge.cache_dir)],
                                       kernelbench=self.kernelbench, allowed=self.task_dirs)
        while True:  # the name is for people; the random part makes it unique
            session_id = f"{slug(task.name)[:48]}-{secrets.token_hex(4)}"
            if not (self.root / session_id).exists():
                break
        directory = self.root / session_id
        env = self._env(session_id, directory)
        await asyncio.to_thread(env.reset, task)
        record = {"version": RECORD_VERSION, "id": session_id, "task": task.name, "origin": task.origin,
                  "spec": spec, "backend": self.judge.backend, "created": _now(), "closed": False, "best": None}
        session = Session(session_id, directory, env, record)
        session.save()
        self._live[session_id] = session
        return session

    def get(self, session_id: str) -> Session:
        """The open session ``session_id``, restored from disk if the server has not seen it yet."""
        session = self._live.get(session_id) or self._restore(session_id)
        if session.record.get("closed"):
            raise ToolError(f"session {session_id} was closed; call open_task with resume={session_id!r} "
                            "to reopen it")
        return session

    def resume(self, session_id: str) -> Session:
        """``session_id`` reopened (a closed one too) over its workspace as it was left."""
        session = self._live.get(session_id) or self._restore(session_id)
        if session.record.get("closed"):
            session.record["closed"] = False
            session.save()
        return session

    def close(self, session_id: str, delete: bool = False) -> dict[str, Any]:
        """Close a session: it stays on disk for ``resume`` unless ``delete`` removes it."""
        session = self.get(session_id)
        self._live.pop(session_id, None)
        summary = session.summary()
        if delete:
            record_path(session.workspace, self.judge.cache_dir).unlink(missing_ok=True)
            shutil.rmtree(session.directory, ignore_errors=True)
        else:
            session.record["closed"] = True
            session.save()
            summary["best_dir"] = str(session.directory / BEST_DIR) if session.record["best"] else None
        return {**summary, "closed": True, "deleted": delete}

    # -- internals ------------------------------------------------------------------------------
    def _directory(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
            raise ToolError(f"{session_id!r} is not a session id; use the id open_task returned")
        return self.root / session_id

    def _restore(self, session_id: str) -> Session:
        directory = self._directory(session_id)
        try:
            record = json.loads((directory / SESSION_FILE).read_text())
        except FileNotFoundError:
            raise ToolError(f"there is no session {session_id!r} under {self.root}; call open_task to start "
                            "one (a session deleted by close_task is gone)") from None
        except (OSError, ValueError) as exc:
            raise ToolError(f"session {session_id}'s record ({directory / SESSION_FILE}) is unreadable "
                            f"({exc}); open the task again with open_task") from None
        if record.get("backend") != self.judge.backend:
            raise ToolError(f"session {session_id} was opened on the {record.get('backend')} backend and this "
                            f"server judges on {self.judge.backend}; restart the server with "
                            f"--device {record.get('backend')} to resume it")
        env = self._env(session_id, directory)
        try:
            found = find_workspace(env.workspace, self.judge.cache_dir)
            env.restore(found.task, turn=0, best=_load_best(directory / BEST_DIR))
        except (WorkspaceError, FileNotFoundError) as exc:
            raise ToolError(f"session {session_id} cannot be resumed: {exc}. If the server ran with another "
                            "--cache-dir before, restart it with that one; else open the task again") from None
        session = Session(session_id, directory, env, record)
        self._live[session_id] = session
        return session

    def _env(self, session_id: str, directory: Path) -> KernelEnv:
        def on_best(best: BestSolution) -> None:
            # Kept apart from the workspace, which later edits may break.
            export_solution(best, directory / BEST_DIR)
            session = self._live.get(session_id)
            if session is not None:
                session.record["best"] = best.summary()
                session.save()

        return KernelEnv(self.judge, directory, device=self.device, on_best=on_best, tool_names=self.tool_names)


def _load_best(directory: Path) -> BestSolution | None:
    """The best solution ``export_solution`` wrote, so a resumed session only replaces it with a
    better one; None if there is none (or it is unreadable, and the next correct one replaces it)."""
    try:
        verdict = json.loads((directory / VERDICT_FILE).read_text())
        files = {p.relative_to(directory).as_posix(): p.read_text() for p in sorted(directory.rglob("*"))
                 if p.is_file() and p.name != VERDICT_FILE}
        return BestSolution(turn=int(verdict.pop("turn", 0)), stage=verdict["stage"], verdict=verdict, files=files)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
