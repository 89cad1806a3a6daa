"""A model's reply as a solution: the files it wrote, found in either of two response formats.

* **Files in fenced blocks** (the single-turn format the prompt asks for): each file's path on the
  line before its code fence, or in the fence's info string::

      kernels/row_max.cpp
      ```cpp
      ...
      ```

* **Tool calls** (the agent's format, as a model trained on agent trajectories writes it):
  ``<tool_call>{"name": "write", "arguments": {"path": ..., "content": ...}}</tool_call>`` blocks,
  read by the same parser as the agent's text protocol. Later writes of a path replace earlier
  ones, as they would in a workspace.

Only the files a solution may have count (``model_new.py`` and sources under ``kernels/``); a
reply that holds none, or holds an unusable path, raises ``ReplyFormatError`` with the reason,
which the reward function turns into -1.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from ..llm.text_protocol import CALL_OPEN, parse_tool_calls
from ..errors import CudaAgentError
from ..solution import KERNEL_DIR, KERNEL_SUFFIXES, MAX_FILE_BYTES, MAX_FILES, MODEL_FILE, Solution

FENCE = re.compile(r"^```[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
PATH_TOKEN = re.compile(r"[A-Za-z0-9_./-]+\.[A-Za-z0-9]+")


class ReplyFormatError(CudaAgentError):
    """The reply holds no solution that could be judged."""


def solution_path(text: str) -> str | None:
    """The solution file named in ``text`` (a heading line or a fence's info string), if any."""
    for token in PATH_TOKEN.findall(text.replace("\\", "/")):
        path = token.lstrip("./")
        if path == MODEL_FILE or (path.startswith(KERNEL_DIR + "/") and path.endswith(KERNEL_SUFFIXES)):
            return path
    return None


def fenced_files(reply: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for match in FENCE.finditer(reply):
        before = reply[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        path = solution_path(match.group("info")) or solution_path(before)
        if path is not None:
            files[path] = match.group("body")
    return files


def written_files(reply: str) -> dict[str, str]:
    files: dict[str, str] = {}
    _, calls = parse_tool_calls(reply)
    for call in calls:
        if call.name != "write":
            continue
        try:
            args = json.loads(call.arguments)
        except json.JSONDecodeError:
            continue
        if isinstance(args, dict) and isinstance(args.get("path"), str) and isinstance(args.get("content"), str):
            path = solution_path(args["path"])
            if path is not None:
                files[path] = args["content"]
    return files


def check_path(path: str) -> None:
    parts = PurePosixPath(path).parts
    if ".." in parts or path.startswith("/"):
        raise ReplyFormatError(f"the reply writes {path!r}, which leaves the workspace")


def solution_from_reply(reply: str) -> Solution:
    """The solution a reply writes; ReplyFormatError says why there is none."""
    if not isinstance(reply, str) or not reply.strip():
        raise ReplyFormatError("the reply is empty")
    files = written_files(reply) if CALL_OPEN in reply else {}
    files = files or fenced_files(reply)
    if not files:
        raise ReplyFormatError("the reply holds no solution file: write model_new.py and the kernels, each "
                               "in a code block after a line naming its path (or as write tool calls)")
    if MODEL_FILE not in files:
        raise ReplyFormatError(f"the reply writes {', '.join(sorted(files))} but no {MODEL_FILE}")
    if len(files) > MAX_FILES:
        raise ReplyFormatError(f"the reply writes {len(files)} files; a solution has at most {MAX_FILES}")
    for path, text in files.items():
        check_path(path)
        try:
            size = len(text.encode())
        except UnicodeEncodeError as exc:  # a lone surrogate ("\\ud800" in a tool call's JSON) has no UTF-8 form
            raise ReplyFormatError(f"{path} holds text that is not valid Unicode ({exc.reason})") from None
        if size > MAX_FILE_BYTES:
            raise ReplyFormatError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    kernels = any(p.startswith(KERNEL_DIR + "/") for p in files)
    return Solution(files, "workspace" if kernels else "single_file", "reply")
