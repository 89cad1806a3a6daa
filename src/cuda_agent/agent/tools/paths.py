"""Resolving the model's path arguments inside the workspace, and refusing the rest.

Every path a file tool touches is resolved (symbolic links included) and must land inside the
workspace: ``..``, absolute paths elsewhere and links that lead out are refused. Writes are also
refused for the judge's protected files, whichever name or link they are reached through, and
for any path that passes through a symbolic link: a write never follows one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from .base import ToolContext, ToolError

PATH_HINT = "give a path relative to the workspace, such as model_new.py or kernels/NAME_binding.cpp"


def workspace_root(ctx: ToolContext) -> Path:
    return ctx.workspace.resolve()


def relative(ctx: ToolContext, path: Path) -> str:
    """``path`` (already resolved, inside the workspace) as a workspace-relative POSIX path."""
    rel = path.relative_to(workspace_root(ctx))
    return PurePosixPath(rel).as_posix() if rel.parts else "."


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _normalised(ctx: ToolContext, raw: str) -> Path:
    """The path as written, made absolute against the workspace, without following links."""
    root = workspace_root(ctx)
    given = Path(raw)
    path = given if given.is_absolute() else root / given
    parts: list[str] = []
    for part in path.parts[1:]:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return Path(path.anchor, *parts)


def resolve(ctx: ToolContext, raw: str) -> Path:
    """The real path of ``raw`` inside the workspace; ToolError when it is elsewhere or hidden."""
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError(f"the path is empty; {PATH_HINT}")
    if "\0" in raw:
        raise ToolError(f"the path {raw!r} contains a NUL character; {PATH_HINT}")
    root = workspace_root(ctx)
    written = _normalised(ctx, raw.strip())
    if not inside(written, root):
        raise ToolError(f"{raw} is outside the workspace ({root}); the file tools work only on the "
                        f"workspace's files: {PATH_HINT}")
    try:
        real = written.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links, say
        raise ToolError(f"{raw} cannot be resolved ({exc}); {PATH_HINT}") from None
    if not inside(real, root):
        raise ToolError(f"{raw} is a symbolic link (or lies under one) that leads outside the workspace, "
                        f"to {real}; the file tools work only on the workspace's files: {PATH_HINT}")
    if any(inside(real, hidden) for hidden in hidden_in_workspace(ctx)):
        raise ToolError(f"{raw} is not accessible to the agent; {PATH_HINT}")
    return real


def hidden_in_workspace(ctx: ToolContext) -> list[Path]:
    """The hidden paths that lie inside the workspace. A hidden directory that holds the
    workspace (an episode's own directory, say) hides only what is outside it, which the file
    tools never reach anyway."""
    root = workspace_root(ctx)
    return [h for h in (p.resolve() for p in ctx.hidden) if h != root and root in h.parents]


def _first_link(root: Path, path: Path) -> Path | None:
    """The first component of ``path`` below ``root`` that is a symbolic link, if any."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return current
        except OSError:
            return None  # the rest does not exist (yet), so it holds no link
    return None


def resolve_writable(ctx: ToolContext, raw: str) -> Path:
    """Like ``resolve``, and also refuses the protected files, by name or through a link, and
    paths through a symbolic link. The path returned holds no link, so writing it follows none."""
    real = resolve(ctx, raw)
    root = workspace_root(ctx)
    written = _normalised(ctx, raw.strip())
    for candidate in (written, real):
        rel = relative(ctx, candidate) if inside(candidate, root) else ""
        if rel in ctx.protected:
            raise ToolError(
                f"{rel} is protected: it belongs to the judge, which always uses its own copy. You may "
                "read it but not change it; put your code in model_new.py and kernels/ instead."
            )
    link = _first_link(root, written)
    if link is not None:
        rel = relative(ctx, link)
        raise ToolError(f"{rel} is a symbolic link, and the file tools never write through one. Write "
                        f"the file by its real path, or replace the link with a regular file or "
                        f"directory" + ctx.hint("bash", f" ({{}}: rm {rel})") + " and write again.")
    if real.is_dir():
        raise ToolError(f"{raw} is a directory; give the path of a file inside it")
    return written
