"""The MCP server: the tools of ``tools.py`` served by the SDK's low-level server (whose schemas
are given, not generated from Python signatures, so they are the agent tools' own), over stdio or
streamable HTTP.

Every call ends in a result: bad arguments, an unknown session or tool and a tool's own failure
come back as error results (``isError``) saying what to do, and the server goes on serving. While
a tool waits for the judge, the server sends progress notifications to clients that asked for
them, so a minute-long judgement does not look like a hang.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from .. import __version__
from ..agent.tools import ToolError
from ..agent.tools.toolbox import check_arguments, index_tools
from ..errors import CudaAgentError
from . import require_mcp
from .sessions import SessionStore
from .tools import ServerTool, ToolResult, server_tools

log = logging.getLogger(__name__)

SERVER_NAME = "cuda-agent"
HTTP_PATH = "/mcp"
PROGRESS_EVERY_S = 5.0
INSTRUCTIONS = (
    "A sandbox for writing fast, correct kernels for PyTorch programs, with a judge that compiles, "
    "verifies and times them and refuses solutions that break its rules. Start with open_task; "
    "every other tool takes the session id it returns."
)

Progress = Callable[[float], Awaitable[None]]


class Dispatcher:
    """Runs a call to one of ``tools``: checks its arguments against the tool's schema, then the
    handler; every failure becomes an error result."""

    def __init__(self, store: SessionStore, tools: list[ServerTool]) -> None:
        self.store = store
        self.tools, self._validators = index_tools(tools)
        # The agent's tools' own messages name the served tools (read_file, not read), and none
        # this server lacks (bash, edit).
        names: dict[str, str] = {}
        for tool in tools:
            if tool.agent_name:
                names.setdefault(tool.agent_name, tool.name)
        store.tool_names = names

    async def call(self, name: str, arguments: Any, progress: Progress | None = None) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(f"there is no tool named {name!r}; the tools are {', '.join(self.tools)}",
                              is_error=True)
        try:
            args = check_arguments(tool, arguments, self._validators[name])
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        try:
            work = tool.run(self.store, args)
            return await (_reporting(work, progress) if tool.judges and progress else work)
        except (ToolError, CudaAgentError) as exc:
            return ToolResult(f"{name} failed: {exc}", is_error=True)
        except Exception as exc:  # noqa: BLE001 - one faulty call must not end the client's session
            log.exception("tool %s raised", name)
            return ToolResult(f"{name} failed with an internal error of the server ({type(exc).__name__}: "
                              f"{exc}); this is not a fault of the call. Try again, or reach the same goal "
                              "another way.", is_error=True)


async def _reporting(work: Awaitable[ToolResult], progress: Progress) -> ToolResult:
    """``work``'s result, with ``progress(seconds so far)`` every few seconds until it comes."""
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PROGRESS_EVERY_S)
            if done:
                return task.result()
            try:
                await progress(time.monotonic() - started)
            except Exception:  # noqa: BLE001 - a client that cannot take progress still gets its result
                log.debug("progress notification failed", exc_info=True)
    finally:
        task.cancel()  # no-op once done; stops the work if the request was cancelled


def build_server(store: SessionStore, tools: list[ServerTool] | None = None) -> Any:
    """The SDK's low-level ``Server`` serving ``tools`` (default: ``server_tools()``) over ``store``."""
    require_mcp()
    import mcp.types as types
    from mcp.server.lowlevel import Server

    dispatcher = Dispatcher(store, tools if tools is not None else server_tools())
    listed = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters,
                         annotations=types.ToolAnnotations(read_only_hint=t.read_only))
              for t in dispatcher.tools.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        async def progress(seconds: float) -> None:
            await ctx.session.report_progress(seconds, None, f"{params.name}: {seconds:.0f} s so far")

        result = await dispatcher.call(params.name, params.arguments, progress)
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                    structured_content=result.data, is_error=result.is_error)

    return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Any) -> None:
    """Serve one client over this process's stdin and stdout (stray output of child processes
    goes to stderr while it runs: the SDK points file descriptor 1 there)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Any, host: str, port: int) -> None:
    """Serve any number of clients over streamable HTTP at ``http://HOST:PORT/mcp``."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
