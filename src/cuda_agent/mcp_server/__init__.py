"""The sandbox as an MCP server (``cuda-agent mcp``): any coding agent that speaks the Model
Context Protocol can open a task, work on its files and have the judge compile, verify, profile
and judge them.

``sessions`` keeps one workspace per session on disk (a ``KernelEnv`` over it, so the server
runs the agent's own tools), ``tasks`` resolves what ``open_task`` names, ``tools`` declares the
tools and ``server`` serves them over stdio or streamable HTTP. Candidate code only ever runs in
the judge: no tool here executes anything from a workspace.

The ``mcp`` SDK is an optional dependency (``pip install 'cuda-agent[mcp]'``); this package
imports it only where it serves.
"""

from __future__ import annotations

from typing import Any

from ..errors import import_extra


def require_mcp() -> Any:
    return import_extra("mcp", "mcp", "the MCP server")
