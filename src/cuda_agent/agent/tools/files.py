"""The file tools: read, write, edit and multi_edit, all confined to the workspace.

Writes go through a temporary file and a rename, so a file is never seen half written and a
hard link to another file (a protected one, say) is replaced rather than written through; paths
through a symbolic link are refused. Only regular files are read: a FIFO or device would block.
The tools' file I/O runs in a worker thread, so a slow disk never stalls the shared event loop.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...files import write_atomic
from ...workspace.layout import PROTECTED_FILES
from .base import Tool, ToolContext, ToolError, ToolLimits, ToolOutput
from .paths import relative, resolve, resolve_writable

MAX_LINE_CHARS = 2_000          # longer lines are cut in read's output
MAX_TEXT_BYTES = 8 * 1024**2    # files larger than this are not loaded as text
SNIPPET_CONTEXT = 3             # lines shown around an edit
SNIPPET_MAX_LINES = 24
NEW_FILE_MODE = 0o644
BINARY_PROBE = 8192             # a NUL byte in this many leading bytes marks a binary file

_PATH = {"type": "string", "description": "File path, relative to the workspace (e.g. kernels/relu.cpp)."}


# -- helpers ----------------------------------------------------------------------------------
def read_regular(path: Path, rel: str, max_bytes: int, ctx: ToolContext | None = None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; ToolError for anything else.

    Opened non-blocking and checked with fstat before reading: opening or reading a FIFO
    would otherwise wait forever for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolError(f"{rel} does not exist" + _hint(ctx, "glob", "; use {} to list the workspace's files")) from None
    except OSError as exc:
        raise ToolError(f"{rel} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{rel} is a directory" + _hint(ctx, "glob", "; use {} (e.g. pattern '" + rel + "/*') to list its files"))
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{rel} is not a regular file (a FIFO, socket or device); the file tools "
                            "handle regular files only")
        if info.st_size > max_bytes:
            raise ToolError(f"{rel} is {info.st_size} bytes, more than the {max_bytes} bytes the file "
                            "tools handle" + _hint(ctx, "bash", "; inspect it with {} (head, tail, grep) instead"))
        chunks, size = [], 0
        while size <= max_bytes:  # the file may grow after fstat
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ToolError(f"{rel} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise ToolError(f"{rel} is more than the {max_bytes} bytes the file tools handle"
                        + _hint(ctx, "bash", "; inspect it with {} (head, tail, grep) instead"))
    return b"".join(chunks)


def _hint(ctx: ToolContext | None, tool: str, text: str) -> str:
    return ctx.hint(tool, text) if ctx is not None else text.format(tool)


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_PROBE]


def load_text(path: Path, rel: str, ctx: ToolContext | None = None) -> str:
    """A workspace file's text, exactly as stored (line endings kept); ToolError if it is not text."""
    data = read_regular(path, rel, MAX_TEXT_BYTES, ctx)
    if is_binary(data):
        raise ToolError(f"{rel} is a binary file ({len(data)} bytes); the file tools handle text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{rel} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                        "the file tools handle UTF-8 text only") from None


def store_text(path: Path, text: str, rel: str) -> bool:
    """Write ``text`` atomically, keeping an existing file's permissions. True if it was created.
    ``path`` comes from ``resolve_writable``, so no component of it is a link."""
    try:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            existed = True
        except FileNotFoundError:
            mode, existed = NEW_FILE_MODE, False
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"), mode)
    except OSError as exc:
        raise ToolError(f"{rel} could not be written: {exc.strerror or exc}") from None
    return not existed


class BlockingTool(Tool):
    """A tool whose work is plain blocking file I/O, done in a worker thread."""

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await asyncio.to_thread(self.call, args, ctx)


def _clip_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}... [line cut: {len(line) - MAX_LINE_CHARS} more characters]"


def numbered(lines: list[str], first: int) -> list[str]:
    """Lines as ``cat -n`` shows them, numbered from ``first``."""
    return [f"{first + i:6d}\t{_clip_line(line)}" for i, line in enumerate(lines)]


def _count_lines(text: str) -> int:
    return len(text.splitlines())


# -- read -------------------------------------------------------------------------------------
class ReadTool(BlockingTool):
    name = "read"
    description = (
        "Read a text file of the workspace. Lines come numbered like `cat -n` (number, tab, text); "
        "the numbers are not part of the file, so leave them out of edit's old_string. Without a "
        "range at most {max_lines} lines are shown, from the start, with a notice saying how to "
        "read on; give offset (first line, 1-based) and limit (number of lines) to read a part of "
        "a long file. Lines longer than 2000 characters are cut. A file must be read before write "
        "may overwrite it. Reading the protected files (" + ", ".join(PROTECTED_FILES) + ") is fine."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show, 1-based."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def __init__(self, limits: ToolLimits | None = None) -> None:
        # The instance's description states the line cap the episode's limits will apply.
        self.description = self.description.format(max_lines=(limits or ToolLimits()).max_read_lines)

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve(ctx, args["path"])
        rel = relative(ctx, path)
        lines = load_text(path, rel, ctx).splitlines()
        ctx.read_files.add(rel)
        total = len(lines)
        if total == 0:
            return ToolOutput(f"{rel} is empty (0 lines)", data={"path": rel, "lines": 0})
        offset = int(args.get("offset") or 1)
        if offset > total:
            raise ToolError(f"offset {offset} is past the end of {rel}, which has {total} lines; "
                            f"use an offset from 1 to {total}")
        limit = int(args["limit"]) if args.get("limit") else ctx.limits.max_read_lines
        shown = numbered(lines[offset - 1:offset - 1 + limit], offset)
        shown, last = _fit(shown, offset, ctx.limits.max_output_chars)
        text = "\n".join(shown)
        if last < total:
            text += (f"\n[showing lines {offset}-{last} of {total}"
                     + ctx.hint("read", f"; call {{}} with offset={last + 1} to see more") + "]")
        return ToolOutput(text, data={"path": rel, "lines": total, "first": offset, "last": last})


def _fit(lines: list[str], first: int, budget: int) -> tuple[list[str], int]:
    """As many whole lines as fit in ``budget`` characters (at least one); and the last line number."""
    kept: list[str] = []
    used = 200  # room for the notice
    for line in lines:
        used += len(line) + 1
        if kept and used > budget:
            break
        kept.append(line)
    return kept, first + len(kept) - 1


# -- write ------------------------------------------------------------------------------------
class WriteTool(BlockingTool):
    name = "write"
    description = (
        "Write a whole file in the workspace, creating it (and its parent directories) or "
        "replacing it. An existing file may only be overwritten after it was read in this "
        "episode (read it first); for changes to part of a file prefer edit or multi_edit. "
        "The protected files (" + ", ".join(PROTECTED_FILES) + ") cannot be "
        "written, nor anything outside the workspace."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "The file's complete new text."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_writable(ctx, args["path"])
        rel = relative(ctx, path)
        if path.exists() and rel not in ctx.read_files:
            raise ToolError(f"{rel} already exists and has not been read in this episode"
                            + ctx.hint("read", "; call {} on it first, then write it again")
                            + ctx.hint("edit", " (or use {} to change a part of it)"))
        content = args["content"]
        created = store_text(path, content, rel)
        ctx.read_files.add(rel)  # the model now knows the whole content
        verb = "created" if created else "overwrote"
        size = len(content.encode("utf-8"))
        return ToolOutput(f"{verb} {rel} ({_count_lines(content)} lines, {size} bytes)",
                          data={"path": rel, "created": created, "bytes": size})


# -- edit, multi_edit -------------------------------------------------------------------------
@dataclass
class _Change:
    start: int   # offset in the new text of the first replacement
    length: int  # its length in the new text
    count: int   # replacements made


def _apply(text: str, old: str, new: str, replace_all: bool, rel: str, label: str) -> tuple[str, _Change]:
    """One replacement in ``text``; ToolError (prefixed with ``label``) when it cannot be made."""
    if old == "":
        raise ToolError(f"{label}old_string is empty; give the exact text to replace (to create or "
                        "rewrite a whole file, use write)")
    if old == new:
        raise ToolError(f"{label}old_string and new_string are the same; there is nothing to change")
    count = text.count(old)
    if count == 0:
        hint = ""
        if "\t" in old or old.lstrip(" ").startswith(tuple("0123456789")):
            hint = " Leave out the line numbers and the tab that read puts before each line."
        raise ToolError(f"{label}old_string was not found in {rel}. It must match the file exactly, "
                        f"whitespace and indentation included; read the file and copy the text.{hint}")
    if count > 1 and not replace_all:
        raise ToolError(f"{label}old_string occurs {count} times in {rel}; include more of the "
                        "surrounding lines to make it unique, or set replace_all to true to replace "
                        "every occurrence")
    start = text.index(old)
    if replace_all:
        return text.replace(old, new), _Change(start, len(new), count)
    return text[:start] + new + text[start + len(old):], _Change(start, len(new), 1)


def _snippet(text: str, change: _Change) -> str:
    """The edited region with a few lines around it, numbered as read shows them."""
    lines = text.splitlines()
    first = text.count("\n", 0, change.start)
    last = first + text.count("\n", change.start, change.start + change.length)
    lo, hi = max(0, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT + 1)
    hi = min(hi, lo + SNIPPET_MAX_LINES)
    return "\n".join(numbered(lines[lo:hi], lo + 1))


def _edit_target(ctx: ToolContext, raw: str) -> tuple[Path, str, str]:
    path = resolve_writable(ctx, raw)
    rel = relative(ctx, path)
    if not path.exists():
        raise ToolError(f"{rel} does not exist; edit changes existing files"
                        + ctx.hint("write", ", use {} to create it"))
    return path, rel, load_text(path, rel, ctx)


def _replacements(count: int) -> str:
    return f"{count} occurrence" + ("" if count == 1 else "s")


class EditTool(BlockingTool):
    name = "edit"
    description = (
        "Replace text in an existing workspace file: old_string must match the file exactly "
        "(whitespace and indentation included, without read's line numbers) and occur once, "
        "unless replace_all is true, which replaces every occurrence. Include enough surrounding "
        "lines to make old_string unique. For several changes to one file use multi_edit. "
        "Protected files and files outside the workspace cannot be edited."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {"type": "boolean", "default": False,
                            "description": "Replace every occurrence instead of exactly one."},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path, rel, text = _edit_target(ctx, args["path"])
        text, change = _apply(text, args["old_string"], args["new_string"], bool(args.get("replace_all")), rel, "")
        store_text(path, text, rel)
        return ToolOutput(f"edited {rel}: replaced {_replacements(change.count)}. Around the change:\n"
                          f"{_snippet(text, change)}", data={"path": rel, "replacements": change.count})


class MultiEditTool(BlockingTool):
    name = "multi_edit"
    description = (
        "Make several replacements in one workspace file, in order, each working on the result "
        "of the ones before it. Each edit is like edit's (old_string must match exactly and "
        "once, unless replace_all). All or nothing: if any edit fails, the file is left "
        "unchanged and the error says which edit failed."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "The replacements, applied in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {"type": "string", "description": "The exact text to replace."},
                        "new_string": {"type": "string", "description": "The text to put in its place."},
                        "replace_all": {"type": "boolean", "default": False,
                                        "description": "Replace every occurrence instead of exactly one."},
                    },
                    "required": ["old_string", "new_string"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
    }

    def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path, rel, text = _edit_target(ctx, args["path"])
        edits = args["edits"]
        total = 0
        for number, edit in enumerate(edits, 1):
            label = f"edit {number} of {len(edits)} failed, so no edit was applied and {rel} is unchanged: "
            text, change = _apply(text, edit["old_string"], edit["new_string"], bool(edit.get("replace_all")),
                                  rel, label)
            total += change.count
        store_text(path, text, rel)
        return ToolOutput(f"edited {rel}: {len(edits)} edits, {_replacements(total)} replaced "
                          f"({_count_lines(text)} lines now)",
                          data={"path": rel, "edits": len(edits), "replacements": total})
