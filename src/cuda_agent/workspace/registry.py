"""Which task a workspace belongs to, recorded where the workspace cannot change it.

Whoever works in a workspace may edit every file in it, so the workspace itself never says which
task it is for. ``create_workspace`` writes a record under
``<cache_dir>/workspaces/<sha256 of the workspace's resolved path>.json`` holding the task's
name, origin and source and the backend; ``find_workspace`` walks up from a path and looks each
ancestor up in that registry, reading nothing inside the workspace.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..device import BACKENDS
from ..errors import CudaAgentError, TaskFormatError
from ..files import write_atomic
from ..task import Task, task_from_source

REGISTRY_DIR = "workspaces"
RECORD_VERSION = 1


class WorkspaceError(CudaAgentError):
    """A workspace cannot be created, or a path is not inside a registered workspace."""


class WorkspaceExistsError(WorkspaceError, FileExistsError):
    """The target directory of a new workspace is not empty."""


@dataclass(frozen=True)
class WorkspaceRecord:
    """A registered workspace: its root directory, its pristine task and its backend."""

    root: Path
    task: Task
    backend: str


def _registry(cache_dir: Path | None) -> Path:
    if cache_dir is None:
        from ..judge.config import default_cache_dir  # imported here: the judge package is heavy

        cache_dir = default_cache_dir()
    return Path(cache_dir) / REGISTRY_DIR


def record_path(root: Path, cache_dir: Path | None = None) -> Path:
    """Where the record of the workspace at ``root`` (resolved) is kept."""
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()
    return _registry(cache_dir) / f"{key}.json"


def _json_safe(metadata: dict) -> dict:
    try:
        return json.loads(json.dumps(metadata, default=str))
    except (TypeError, ValueError):  # keys that are not strings, circular values
        return {}


def register_workspace(root: Path, task: Task, backend: str, cache_dir: Path | None = None) -> Path:
    """Record that ``root`` is a workspace for ``task`` on ``backend``; return the record's path."""
    if backend not in BACKENDS:
        raise WorkspaceError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    root = Path(root).resolve()
    path = record_path(root, cache_dir)
    record = {
        "version": RECORD_VERSION,
        "root": str(root),
        "backend": backend,
        "task": {"name": task.name, "origin": task.origin, "source": task.source,
                 "sha256": task.sha256, "metadata": _json_safe(task.metadata)},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cuda_agent_version": __version__,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1))
    return path


def _load_record(path: Path, root: Path) -> WorkspaceRecord | None:
    """The record at ``path`` if it belongs to ``root``; raise WorkspaceError if it is unreadable."""
    try:
        data = json.loads(path.read_text())
        if data.get("root") != str(root):
            return None  # a different directory with the same hash: not ours
        task_data = data["task"]
        source, backend = task_data["source"], data["backend"]
        if not isinstance(source, str) or backend not in BACKENDS:
            raise ValueError("bad task source or backend")
        if task_data.get("sha256") not in (None, hashlib.sha256(source.encode()).hexdigest()):
            raise ValueError("the task source does not match its recorded hash")
        task = task_from_source(source, str(task_data["name"]), str(task_data["origin"]),
                                task_data.get("metadata") or {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, TaskFormatError) as exc:
        raise WorkspaceError(
            f"the registry record of workspace {root} ({path}) is unreadable ({exc}); recreate the "
            "workspace with `cuda-agent workspace TASK DIR --force`, or pass --task TASK"
        ) from None
    return WorkspaceRecord(root=root, task=task, backend=backend)


def find_workspace(path: Path, cache_dir: Path | None = None) -> WorkspaceRecord:
    """The registered workspace containing ``path`` (the nearest one, walking up).

    Only the registry is consulted: the task comes from the record made when the workspace was
    created, never from files inside the workspace.
    """
    start = Path(path).resolve()
    for candidate in (start, *start.parents):
        record_file = record_path(candidate, cache_dir)
        if record_file.is_file():
            record = _load_record(record_file, candidate)
            if record is not None:
                return record
    raise WorkspaceError(
        f"{path} is not inside a workspace created by `cuda-agent workspace TASK DIR` "
        f"(no record under {_registry(cache_dir)}); pass --task TASK to name the task"
    )
