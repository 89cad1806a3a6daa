"""The search tools: glob (files by name pattern) and grep (lines by regular expression).

Both stay inside the workspace and run in a worker thread, so a large tree never stalls the
event loop that other episodes share. Only regular files are listed and searched.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .base import Tool, ToolContext, ToolError, ToolOutput
from .files import is_binary, read_regular
from .paths import hidden_in_workspace, inside, relative, resolve, workspace_root

MAX_SCAN = 20_000                 # files looked at per call, before giving up on the rest
MAX_GREP_FILE_BYTES = 1024**2     # larger files are skipped by grep
MAX_GREP_LINE_CHARS = 400
MAX_CONTEXT = 10
SKIP_DIRS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache"})

_DIR = {"type": "string", "description": "Directory to search, relative to the workspace (default: the workspace)."}


def _search_root(ctx: ToolContext, raw: str | None) -> Path:
    return resolve(ctx, raw) if raw else workspace_root(ctx)


# -- glob -------------------------------------------------------------------------------------
class GlobTool(Tool):
    name = "glob"
    description = (
        "List the workspace files whose path matches a glob pattern, newest first (most recently "
        "modified at the top). `*` matches within one directory level, `**` any number of levels: "
        "'kernels/*.cpp', '**/*_binding.cpp', '**/*' (every file). Give path to search under a "
        "subdirectory. At most {max_matches} files are listed, with a notice when there are more."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, relative to path (e.g. '**/*.cpp')."},
            "path": _DIR,
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def __init__(self, max_matches: int = 200) -> None:
        self.description = self.description.format(max_matches=max_matches)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = args["pattern"].strip()
        if not pattern:
            raise ToolError("the pattern is empty; give a glob pattern such as '**/*.cpp'")
        if pattern.startswith("/") or ".." in PurePosixPath(pattern).parts:
            raise ToolError(f"the pattern {pattern!r} must be relative and may not contain '..'; "
                            "give the directory as path and a relative pattern such as '*.cpp'")
        base, found, scanned_all = await asyncio.to_thread(_glob_under, args.get("path"), pattern, ctx)
        where = relative(ctx, base)
        if not found:
            hint = " ('**' alone matches directories; use '**/*' for every file)" if pattern.endswith("**") else ""
            return ToolOutput(f"no files match {pattern!r} under {where}{hint}",
                              data={"matches": 0})
        found.sort(key=lambda item: (-item[1], item[0]))
        cap = ctx.limits.max_matches
        lines = [rel for rel, _ in found[:cap]]
        if len(found) > cap or not scanned_all:
            more = f"{len(found) - cap} more" if scanned_all else "more"
            lines.append(f"[{more} files not shown; narrow the pattern or the path]")
        return ToolOutput("\n".join(lines), data={"matches": len(found), "complete": scanned_all})


def _glob_under(raw: str | None, pattern: str, ctx: ToolContext) -> tuple[Path, list[tuple[str, float]], bool]:
    base = _search_root(ctx, raw)
    if not base.is_dir():
        raise ToolError(f"{relative(ctx, base)} is not a directory; the path "
                        + ctx.hint("glob", "of {} ") + "names the directory to search in")
    return (base, *_glob(base, pattern, ctx))


def _glob(base: Path, pattern: str, ctx: ToolContext) -> tuple[list[tuple[str, float]], bool]:
    root = workspace_root(ctx)
    hidden = hidden_in_workspace(ctx)
    found: list[tuple[str, float]] = []
    try:
        matches = base.glob(pattern)
        for count, path in enumerate(matches):
            if count >= MAX_SCAN:
                return found, False
            try:
                real = path.resolve()
                if not path.is_file() or not inside(real, root) or any(inside(real, h) for h in hidden):
                    continue
                found.append((PurePosixPath(path.relative_to(root)).as_posix(), path.stat().st_mtime))
            except (OSError, ValueError, RuntimeError):
                continue  # vanished, or a broken or looping link
    except (ValueError, NotImplementedError) as exc:
        raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
    return found, True


# -- grep -------------------------------------------------------------------------------------
@dataclass
class _GrepResult:
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    files_matched: int = 0
    files_searched: int = 0
    skipped: list[str] = field(default_factory=list)
    capped: bool = False


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search the workspace's text files for a regular expression (Python `re` syntax) and show "
        "matching lines as `file:line: text`; with context, neighbouring lines appear as "
        "`file-line- text` and groups are separated by `--`. path narrows the search to a "
        "directory or one file; glob filters file names ('*.cpp', or 'kernels/*.h' to match the "
        "relative path). Binary files and files over 1 MB are skipped. At most {max_matches} "
        "matching lines are shown, with a notice when there are more."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python re syntax)."},
            "path": {"type": "string",
                     "description": "File or directory to search, relative to the workspace (default: all of it)."},
            "glob": {"type": "string",
                     "description": "Only files whose name (or relative path) matches, e.g. '*.cpp'."},
            "ignore_case": {"type": "boolean", "default": False, "description": "Match case-insensitively."},
            "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 0,
                        "description": "Lines of context to show before and after each match."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def __init__(self, max_matches: int = 200) -> None:
        self.description = self.description.format(max_matches=max_matches)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = args["pattern"]
        try:
            regex = re.compile(pattern, re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}. grep uses Python's re "
                            "syntax; escape special characters such as ( [ . * + ? with a backslash") from None
        target = await asyncio.to_thread(_search_root, ctx, args.get("path"))
        context = int(args.get("context") or 0)
        result = await asyncio.to_thread(_grep, target, regex, args.get("glob"), context, ctx)
        return ToolOutput(_render(result, pattern, relative(ctx, target), ctx.limits.max_matches),
                          data={"matches": result.matches, "files_matched": result.files_matched,
                                "files_searched": result.files_searched, "skipped": result.skipped[:50],
                                "capped": result.capped})


def _render(result: _GrepResult, pattern: str, where: str, cap: int) -> str:
    if not result.matches:
        skipped = f" ({len(result.skipped)} binary or large files skipped)" if result.skipped else ""
        return f"no matches for {pattern!r} in {result.files_searched} files under {where}{skipped}"
    text = "\n".join(result.lines)
    if result.capped:
        text += (f"\n[stopped after {cap} matching lines; narrow the pattern, the path or the glob "
                 "to see the rest]")
    return text


def _wanted(rel: str, name: str, glob: str | None) -> bool:
    if not glob:
        return True
    if "/" not in glob:
        return fnmatch.fnmatch(name, glob)
    return fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(rel, glob.removeprefix("**/"))


def _files(target: Path, glob: str | None, ctx: ToolContext) -> list[tuple[str, Path]]:
    """The files to search: their workspace-relative names and real paths."""
    root = workspace_root(ctx)
    if target.is_file():
        return [(relative(ctx, target), target)]
    hidden = hidden_in_workspace(ctx)
    files: list[tuple[str, Path]] = []
    for directory, dirs, names in os.walk(target):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = Path(directory) / name
            rel = PurePosixPath(path.relative_to(root)).as_posix()
            if not _wanted(rel, name, glob):
                continue
            try:
                real = path.resolve()
                if not path.is_file() or not inside(real, root) or any(inside(real, h) for h in hidden):
                    continue  # not a regular file (a FIFO would block), or it leads out or is hidden
            except (OSError, RuntimeError):
                continue  # vanished, or a looping link
            files.append((rel, real))
            if len(files) >= MAX_SCAN:
                return files
    return files


def _grep(target: Path, regex: re.Pattern[str], glob: str | None, context: int, ctx: ToolContext) -> _GrepResult:
    cap = ctx.limits.max_matches
    result = _GrepResult()
    for rel, path in _files(target, glob, ctx):
        lines = _text_lines(path, rel)
        if lines is None:
            result.skipped.append(rel)
            continue
        result.files_searched += 1
        hits = [i for i, line in enumerate(lines) if regex.search(line)]
        if not hits:
            continue
        room = cap - result.matches
        if len(hits) > room:
            hits, result.capped = hits[:room], True
        result.files_matched += 1
        result.matches += len(hits)
        result.lines += _show(rel, lines, hits, context, separate=bool(result.lines) and context > 0)
        if result.capped:
            break
    return result


def _text_lines(path: Path, rel: str) -> list[str] | None:
    """The file's lines, or None for binary, unreadable, very large or non-regular files."""
    try:
        data = read_regular(path, rel, MAX_GREP_FILE_BYTES)
    except ToolError:
        return None
    if is_binary(data):
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _clip(line: str) -> str:
    return line if len(line) <= MAX_GREP_LINE_CHARS else line[:MAX_GREP_LINE_CHARS] + "... [line cut]"


def _show(rel: str, lines: list[str], hits: list[int], context: int, separate: bool) -> list[str]:
    """Matching lines of one file, with ``context`` lines around each; overlapping groups merge."""
    if context == 0:
        return [f"{rel}:{i + 1}: {_clip(lines[i])}" for i in hits]
    out: list[str] = []
    shown_to = -1
    matched = set(hits)
    for i in hits:
        lo, hi = max(0, i - context), min(len(lines), i + context + 1)
        if lo > shown_to + 1 and (out or separate):
            out.append("--")
        for j in range(max(lo, shown_to + 1), hi):
            mark = ":" if j in matched else "-"
            out.append(f"{rel}{mark}{j + 1}{mark} {_clip(lines[j])}")
        shown_to = max(shown_to, hi - 1)
    return out
