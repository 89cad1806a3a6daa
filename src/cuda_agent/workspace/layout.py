"""Create an agent workspace: CUDA Agent's layout, for one task and one backend.

    DIR/
      SKILL.md              the rules and the workflow, with the device's facts
      model.py              the task, verbatim (read only; the judge uses its own copy)
      model_new.py          ModelNew with Model's constructor signature, to be filled in
      kernels/              the agent's sources (starts empty)
      binding_registry.h    copies of the judge's binding files, for reading; the judge
      binding.cpp           always builds with its own

The workspace is registered outside itself (see ``registry``), so the judge's commands run inside
it can find the pristine task without trusting any file there.
"""

from __future__ import annotations

from pathlib import Path

from ..device import BACKENDS, DeviceInfo
from ..files import write_atomic
from ..solution import KERNEL_DIR, MODEL_FILE
from ..task import Task
from .registry import WorkspaceError, WorkspaceExistsError, register_workspace
from .skill import FILES_DIR, render_skill
from .starter import render_model_new

REFERENCE_FILE = "model.py"
SKILL_FILE = "SKILL.md"
INFRA_FILES = ("binding_registry.h", "binding.cpp")
# what the agent may read but never change: the task and the judge's files
PROTECTED_FILES = (REFERENCE_FILE, SKILL_FILE, *INFRA_FILES)
READ_ONLY = 0o444
WRITABLE = 0o644


def workspace_files(task: Task, backend: str, device: DeviceInfo | None = None) -> dict[str, tuple[str, int]]:
    """The files of a new workspace: relative path -> (text, mode)."""
    files = {
        REFERENCE_FILE: (task.source, READ_ONLY),
        MODEL_FILE: (render_model_new(task), WRITABLE),
        SKILL_FILE: (render_skill(backend, device, task.name), READ_ONLY),
    }
    for name in INFRA_FILES:
        files[name] = ((FILES_DIR / name).read_text(), READ_ONLY)
    return files


def create_workspace(task: Task, directory: Path, backend: str, device: DeviceInfo | None = None,
                     *, force: bool = False, cache_dir: Path | None = None) -> Path:
    """Write a workspace for ``task`` into ``directory``, register it, and return its resolved root.

    A non-empty ``directory`` is refused unless ``force`` is set; then the workspace's own files
    are rewritten and everything else (``kernels/`` included) is left as it is. ``cache_dir``
    holds the registry (default: the judge's cache directory).
    """
    if backend not in BACKENDS:
        raise WorkspaceError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if device is not None and device.backend != backend:
        raise WorkspaceError(
            f"the device facts are for the {device.backend} backend but the workspace is for {backend}"
        )
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise WorkspaceExistsError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise WorkspaceExistsError(
            f"{directory} is not empty; choose a new directory, or pass --force to rewrite the "
            "workspace files in it (kernels/ and other files are kept)"
        )
    kernels = directory / KERNEL_DIR
    if kernels.exists() and not kernels.is_dir():
        raise WorkspaceExistsError(f"{kernels} exists and is not a directory")

    files = workspace_files(task, backend, device)  # render everything before writing anything
    kernels.mkdir(parents=True, exist_ok=True)
    for rel, (text, mode) in files.items():
        write_atomic(directory / rel, text, mode)
    root = directory.resolve()
    register_workspace(root, task, backend, cache_dir)
    return root
