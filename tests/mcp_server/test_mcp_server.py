"""`cuda-agent mcp` driven as an MCP client drives it: the official SDK's client over stdio (and
once over streamable HTTP), against the real server process and the real CPU judge.

One server process serves the module (a background event loop holds its connection), so the
judge's pool and build cache warm up once; the resume test starts a second process on the same
root, as a restarted server would be.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
TASK = TESTS / "fixtures" / "tasks" / "scale_bias_relu.py"
HONEST = TESTS / "fixtures" / "solutions" / "cpu" / "correct"
# forward returns torch.relu(...) and calls its kernel on one row as a token
CHEATING = TESTS / "adversarial" / "cases" / "a01_torch_passthrough" / "solution"
KERNELBENCH = TESTS / "fixtures" / "kernelbench"
DATASET = TESTS.parent / "examples" / "synth" / "sample.parquet"
TOOLS = {"open_task", "list_files", "read_file", "write_file", "compile", "verify", "profile", "judge", "roofline",
         "close_task"}
CALL_TIMEOUT_S = 600.0


def server_args(root: Path, cache: Path, *extra: str, device: str = "cpu", timing: Path | None = None) -> list[str]:
    # Short timing sessions (the suite's, from its timing file, where given): the tests check what
    # the tools answer, not how steady the times are.
    short = ["--timing", str(timing)] if timing is not None else ["--timing-seconds", "0.2"]
    return ["-m", "cuda_agent.cli", "mcp", "--device", device, "--root", str(root), "--cache-dir", str(cache),
            "--concurrency", "1", *short, *extra]


class Client:
    """An MCP client session over stdio, held open by an event loop in a thread, so that tests
    (which are synchronous) share one server process."""

    def __init__(self, root: Path, cache: Path, log: Path, device: str = "cpu", timing: Path | None = None) -> None:
        self.params = StdioServerParameters(command=sys.executable,
                                            args=server_args(root, cache, "--kernelbench", str(KERNELBENCH),
                                                             device=device, timing=timing),
                                            env=dict(os.environ))  # the SDK passes only a few variables
        self.log = log.open("a")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stop: asyncio.Event | None = None
        self.session: ClientSession = self.run(self._start())

    async def _start(self) -> ClientSession:
        ready: asyncio.Future = self.loop.create_future()
        self.stop = asyncio.Event()
        self.holder = asyncio.ensure_future(self._hold(ready))
        return await ready

    async def _hold(self, ready: asyncio.Future) -> None:
        # The transport's context is entered and left in this one task, as anyio requires.
        try:
            async with stdio_client(self.params, errlog=self.log) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                ready.set_result(session)
                await self.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def run(self, coroutine: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.run(self.session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT_S))

    def close(self) -> None:
        async def finish() -> None:
            self.stop.set()
            await self.holder

        try:
            self.run(finish(), timeout=120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.log.close()


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def open_session(client: Client, **arguments: str) -> dict[str, Any]:
    result = client.call("open_task", arguments or {"task": str(TASK)})
    assert not result.is_error, text(result)
    return result.structured_content


def write_solution(client: Client, session: str, solution: Path) -> None:
    """Write a solution's files as an agent would: an existing file is read before it is replaced."""
    for path in sorted(p for p in solution.rglob("*") if p.is_file()):
        rel = path.relative_to(solution).as_posix()
        if rel == "model_new.py":  # the workspace starts with one
            assert not client.call("read_file", {"session": session, "path": rel}).is_error
        result = client.call("write_file", {"session": session, "path": rel, "content": path.read_text()})
        assert not result.is_error, text(result)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp-root")


@pytest.fixture(scope="module")
def client(root, judge_cache, tmp_path_factory, fast_timing_file):
    log = tmp_path_factory.mktemp("mcp-log") / "server.log"
    client = Client(root, judge_cache, log, timing=fast_timing_file)
    yield client
    client.close()


@pytest.fixture(scope="module")
def honest(client) -> tuple[dict[str, Any], Any]:
    """A session whose honest solution was judged: (open_task's result, judge's result)."""
    opened = open_session(client)
    write_solution(client, opened["session"], HONEST)
    return opened, client.call("judge", {"session": opened["session"]})


def test_lists_its_tools(client):
    tools = {tool.name: tool for tool in client.run(client.session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["read_file"].input_schema["required"] == ["session", "path"]
    assert tools["read_file"].annotations.read_only_hint and not tools["write_file"].annotations.read_only_hint


def test_open_task_gives_the_session_the_task_and_the_rules(client):
    result = client.call("open_task", {"task": str(TASK)})
    assert not result.is_error, text(result)
    opened = result.structured_content
    assert opened["task"] == "scale_bias_relu" and opened["backend"] == "cpu"
    assert opened["session"] in text(result) and "class Model(nn.Module)" in text(result)
    assert "SKILL.md" in text(result)
    listed = client.call("list_files", {"session": opened["session"]})
    assert {"model.py", "model_new.py", "SKILL.md"} <= set(text(listed).split())


@pytest.mark.slow
def test_honest_solution_is_accepted(honest):
    _, result = honest
    verdict = result.structured_content
    assert not result.is_error, text(result)
    assert verdict["status"] == "ok" and verdict["correct"] and verdict["reward"] >= 1, verdict["feedback"]
    assert json.loads(text(result)) == verdict  # the text is the verdict's JSON, for clients that show only text
    assert verdict["feedback"] and verdict["violations"] == []


@pytest.mark.slow
def test_the_roofline_comes_from_the_last_timed_verdict(client, honest):
    opened, _ = honest
    roof = client.call("roofline", {"session": opened["session"]})
    assert not roof.is_error, text(roof)
    assert roof.structured_content["drawn"] is False  # the CPU backend draws none, and says so
    assert "not drawn" in text(roof) and "CPU backend" in text(roof)
    fresh = open_session(client)["session"]
    nothing = client.call("roofline", {"session": fresh})
    assert nothing.is_error and "profile or judge first" in text(nothing)


@pytest.mark.slow
def test_cheating_solution_is_refused_with_its_rule(client):
    session = open_session(client)["session"]
    write_solution(client, session, CHEATING)
    result = client.call("judge", {"session": session})
    verdict = result.structured_content
    assert verdict["status"] == "forbidden" and not verdict["correct"] and verdict["reward"] == -1
    assert "torch_compute" in {v["rule"] for v in verdict["violations"]}
    assert "torch_compute" in text(result)


def test_open_task_takes_a_dataset_row_and_a_kernelbench_problem(client):
    row = open_session(client, task=f"{DATASET}#3")
    assert row["origin"] == f"{DATASET}:3"
    problem = open_session(client, task="level2/3")
    assert problem["task"] == "3_Gemm_BiasAdd_ReLU"
    listed = client.call("read_file", {"session": problem["session"], "path": "model.py"})
    assert "class Model" in text(listed)


def test_malformed_calls_are_tool_errors_and_the_session_goes_on(client):
    session = open_session(client)["session"]
    cases = [
        ("read_file", {"session": "no-such-session", "path": "model.py"}, "no session 'no-such-session'"),
        ("read_file", {"session": session}, "missing required argument 'path'"),
        ("read_file", {"session": session, "path": "../../../etc/passwd"}, "outside the workspace"),
        ("write_file", {"session": session, "path": "model.py", "content": ""}, "model.py is protected"),
        ("open_task", {"task": str(TASK.with_name("missing.py"))}, "does not exist"),
        ("open_task", {"task": "1/999"}, "none of the problems"),
        ("open_task", {}, "either task"),
        ("no_such_tool", {}, "no tool named 'no_such_tool'"),
    ]
    for name, arguments, expected in cases:
        result = client.call(name, arguments)
        assert result.is_error, (name, arguments, text(result))
        assert expected in text(result), (name, text(result))
    # the same connection and session still work
    after = client.call("read_file", {"session": session, "path": "model_new.py"})
    assert not after.is_error and "class ModelNew" in text(after)


def test_errors_send_the_client_only_to_tools_the_server_serves(client):
    """The agent's file tools say "call read" or "use edit"; served as MCP tools, their messages
    name read_file and list_files, and nothing the server lacks (edit, bash)."""
    session = open_session(client)["session"]
    unread = text(client.call("write_file", {"session": session, "path": "model_new.py", "content": "x"}))
    assert "call read_file on it first" in unread, unread
    assert "edit" not in unread and "call read " not in unread, unread
    missing = text(client.call("read_file", {"session": session, "path": "kernels/none.cpp"}))
    assert "use list_files to list" in missing and "glob" not in missing, missing


def test_a_task_where_clients_or_candidates_write_is_refused(client, root, judge_cache):
    """A client writes its workspace and a candidate its run directory in the judge's cache, so a
    file in either is no trusted reference for the judge."""
    session = open_session(client)["session"]
    client.call("read_file", {"session": session, "path": "model_new.py"})
    client.call("write_file", {"session": session, "path": "model_new.py", "content": TASK.read_text()})
    result = client.call("open_task", {"task": str(root / session / "workspace" / "model_new.py")})
    assert result.is_error and f"inside {root.resolve()}" in text(result)
    left_behind = judge_cache / "mcp-test" / "model.py"
    left_behind.parent.mkdir(exist_ok=True)
    left_behind.write_text(TASK.read_text())
    result = client.call("open_task", {"task": str(left_behind)})
    assert result.is_error and f"inside {judge_cache.resolve()}" in text(result)


@pytest.mark.slow
def test_a_session_resumes_after_a_restart(client, honest, root, judge_cache, tmp_path, fast_timing_file):
    opened, _ = honest
    session = opened["session"]
    again = Client(root, judge_cache, tmp_path / "second.log", timing=fast_timing_file)  # a server that never saw the session
    try:
        result = again.call("open_task", {"resume": session})
        assert not result.is_error, text(result)
        assert result.structured_content["best"]["correct"] and "Resumed" in text(result)
        kernel = again.call("read_file", {"session": session, "path": "kernels/scale_bias_relu.cpp"})
        assert "scale_bias_relu_launch" in text(kernel)
        closed = again.call("close_task", {"session": session})
        assert not closed.is_error and (root / session / "best" / "model_new.py").is_file()
        assert again.call("list_files", {"session": session}).is_error  # closed until resumed
    finally:
        again.close()


def test_task_files_come_only_from_the_folders_the_operator_names(tmp_path):
    from cuda_agent.agent.tools import ToolError
    from cuda_agent.mcp_server.tasks import resolve_task

    assert resolve_task(str(TASK), untrusted=[], kernelbench=None, allowed=[TASK.parent]).name == "scale_bias_relu"
    assert resolve_task(str(TASK), untrusted=[], kernelbench=None).name == "scale_bias_relu"  # stdio: any file
    with pytest.raises(ToolError, match="--tasks-from"):
        resolve_task(str(TASK), untrusted=[], kernelbench=None, allowed=[tmp_path])
    with pytest.raises(ToolError, match="KernelBench problems only"):
        resolve_task(str(TASK), untrusted=[], kernelbench=None, allowed=[])


@pytest.mark.slow
def test_http_transport_serves_the_tools(root, judge_cache, tmp_path, fast_timing_file):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(tmp_path / "http.log", "w") as log:
        server = subprocess.Popen([sys.executable, *server_args(root, judge_cache, "--http", str(port),
                                                                "--tasks-from", str(TASK.parent),
                                                                timing=fast_timing_file)],
                                  stdout=log, stderr=subprocess.STDOUT)
    elsewhere = tmp_path / "elsewhere" / "task.py"  # readable by the server, but not in a --tasks-from folder
    elsewhere.parent.mkdir()
    elsewhere.write_text(TASK.read_text())
    try:
        async def exercise() -> None:
            deadline = time.monotonic() + 120
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "http.log").read_text()
                    await asyncio.sleep(0.2)
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
                no_checkout = await session.call_tool("open_task", {"task": "1/1"})
                assert no_checkout.is_error and "--kernelbench" in text(no_checkout)
                outside = await session.call_tool("open_task", {"task": str(elsewhere)})
                assert outside.is_error and "--tasks-from" in text(outside)
                opened = await session.call_tool("open_task", {"task": str(TASK)})
                assert not opened.is_error, text(opened)
                closed = await session.call_tool("close_task", {"session": opened.structured_content["session"],
                                                                "delete": True})
                assert not closed.is_error and "deleted" in text(closed)

        asyncio.run(exercise())
    finally:
        server.terminate()
        assert server.wait(60) == 0, (tmp_path / "http.log").read_text()
