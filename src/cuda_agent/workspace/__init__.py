"""The agent workspace: CUDA Agent's layout, its SKILL.md, and the registry that ties a workspace
to its task.

``create_workspace`` writes ``model.py`` (the task), a ``model_new.py`` to fill in, an empty
``kernels/``, read-only copies of the judge's binding files and ``SKILL.md``, and registers the
workspace outside itself. ``find_workspace`` maps any path inside a workspace back to its pristine
task, without reading anything in the workspace. ``files/`` holds the judge's own binding files
and the SKILL.md template.
"""

from .layout import INFRA_FILES, REFERENCE_FILE, SKILL_FILE, create_workspace, workspace_files
from .registry import (WorkspaceError, WorkspaceExistsError, WorkspaceRecord, find_workspace,
                       record_path, register_workspace)
from .skill import device_facts, render_skill
from .starter import NOT_IMPLEMENTED_MESSAGE, render_model_new

__all__ = [
    "INFRA_FILES",
    "NOT_IMPLEMENTED_MESSAGE",
    "REFERENCE_FILE",
    "SKILL_FILE",
    "WorkspaceError",
    "WorkspaceExistsError",
    "WorkspaceRecord",
    "create_workspace",
    "device_facts",
    "find_workspace",
    "record_path",
    "register_workspace",
    "render_model_new",
    "render_skill",
    "workspace_files",
]
