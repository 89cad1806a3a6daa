"""The bash tool: output, exit codes, time limits, output caps, the sandbox and protected files."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_agent.llm.messages import ToolCall
from cuda_agent.agent.tools import ToolBox, ToolContext, ToolLimits, ToolOutput, default_tools
from cuda_agent.agent.tools import shell
from cuda_agent.judge.landlock import LandlockError, abi_version

LANDLOCK = abi_version() >= 1
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="Landlock is not available in this kernel")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    for name in ("model.py", "SKILL.md"):
        (root / name).write_text(f"original {name}\n")
        (root / name).chmod(0o444)
    return root


@pytest.fixture
def ctx(ws: Path, tmp_path: Path, task) -> ToolContext:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "secret.txt").write_text("the-secret-seed")
    return ToolContext(workspace=ws, task=task, judge=None, scratch=tmp_path / "scratch", hidden=[hidden],
                       protected=frozenset({"model.py", "SKILL.md"}),
                       limits=ToolLimits(bash_timeout_s=20.0, max_output_chars=2000))


@pytest.fixture
def box() -> ToolBox:
    return ToolBox(default_tools())


def pid_namespace_available() -> bool:
    return asyncio.run(shell.namespaces()).pid


@pytest.fixture(params=["pid_namespace", "fallback"])
def mode(request, monkeypatch) -> str:
    """Run the test with the command in a PID namespace, and without one (as where the OS
    refuses it): the guarantees that do not depend on the namespace must hold either way."""
    if request.param == "pid_namespace":
        if not pid_namespace_available():
            pytest.skip("no PID namespace here (it needs CAP_SYS_ADMIN)")
    else:
        real = shell.namespaces

        async def without_pid() -> shell.Namespaces:
            return shell.Namespaces(network=(await real()).network, pid=False)

        monkeypatch.setattr(shell, "namespaces", without_pid)
    return request.param


# The pid as /proc shows it (the host's), which a PID namespace's $$ and $! are not.
HOST_PID = "read pid _ < /proc/self/stat; echo $pid"


async def abash(box: ToolBox, ctx: ToolContext, command: str, **args) -> ToolOutput:
    return await box.call(ToolCall("c", "bash", json.dumps({"command": command, **args})), ctx)


def bash(box: ToolBox, ctx: ToolContext, command: str, **args) -> ToolOutput:
    return asyncio.run(abash(box, ctx, command, **args))


def gone(pid: int, within_s: float = 2.0) -> bool:
    """The process stops running within ``within_s`` (it may linger as a zombie where nothing
    reaps orphans). A killed process closes its files before it is marked dead: on a loaded
    machine it can be seen between the two, after the tool has seen its output close."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def test_output_is_interleaved_and_the_exit_code_reported(box, ctx, mode):
    out = bash(box, ctx, "echo one; echo two >&2; echo three; exit 3")
    assert not out.is_error
    assert out.text == "one\ntwo\nthree\n[exit code 3]"
    assert out.data["exit_code"] == 3 and out.data["timed_out"] is False
    assert bash(box, ctx, "true").text == "(no output)\n[exit code 0]"
    assert "killed by SIGKILL" in bash(box, ctx, "kill -9 $$").text
    assert "killed by SIGTERM" in bash(box, ctx, "kill $$").text
    assert bash(box, ctx, "trap 'echo caught' TERM; kill $$; echo after").text == "caught\nafter\n[exit code 0]"
    assert "command not found\n[exit code 127]" in bash(box, ctx, "no-such-command-here").text


def test_ordinary_commands_work(box, ctx, ws, mode):
    (ws / "kernels" / "a.txt").write_text("b\na\nc\n")
    assert bash(box, ctx, "cd kernels && sort a.txt | head -n 2 | tr a-z A-Z").text == "A\nB\n[exit code 0]"
    # a writer to a closed pipe dies of SIGPIPE, as in any shell
    assert bash(box, ctx, "yes | head -n 1; echo ${PIPESTATUS[0]}").text == "y\n141\n[exit code 0]"
    out = bash(box, ctx, "(sleep 0.3; echo late) & sleep 0.1 & wait; echo done; false")
    assert out.text == "late\ndone\n[exit code 1]"
    out = bash(box, ctx, "python3 -c 'import sys; print(sys.argv[1:]); sys.exit(5)' x 'y z'")
    assert out.text == "['x', 'y z']\n[exit code 5]"
    if shell._cuda_bin():
        assert "Cuda compilation tools" in bash(box, ctx, "nvcc --version").text


def test_each_call_is_a_fresh_shell_in_the_workspace(box, ctx, ws, monkeypatch, mode):
    monkeypatch.setenv("SECRET_API_KEY", "sk-do-not-leak")
    bash(box, ctx, "cd kernels && export FOO=bar")
    out = bash(box, ctx, 'pwd; echo "foo=$FOO"; echo "home=$HOME"; env')
    lines = out.text.splitlines()
    assert lines[0] == str(ws.resolve()) and lines[1] == "foo="
    assert lines[2] == f"home={ctx.scratch}"
    assert "sk-do-not-leak" not in out.text and "SECRET_API_KEY" not in out.text


def test_timeout_kills_the_whole_process_group(box, ctx, ws, mode):
    started = time.monotonic()
    out = bash(box, ctx, f"echo before; sh -c '{HOST_PID} > bg.pid; exec sleep 60' & "
                         "while [ ! -s bg.pid ]; do sleep 0.05; done; sleep 60", timeout_s=1)
    assert time.monotonic() - started < 10
    assert out.is_error and out.data["timed_out"] is True
    assert "timed out after 1 s" in out.text and "before" in out.text
    assert gone(int((ws / "bg.pid").read_text()))


def test_the_limit_caps_the_requested_timeout(box, ctx):
    ctx.limits = ToolLimits(bash_timeout_s=1.0, max_output_chars=2000)
    out = bash(box, ctx, "sleep 30", timeout_s=600)
    assert out.data["timed_out"] is True and "after 1 s" in out.text


def test_background_jobs_end_with_the_command(box, ctx, mode):
    started = time.monotonic()
    out = bash(box, ctx, f"sh -c '{HOST_PID} > bg.pid; exec sleep 60' & "
                         "while [ ! -s bg.pid ]; do sleep 0.05; done; cat bg.pid")
    assert time.monotonic() - started < 5 and out.data["exit_code"] == 0
    assert gone(int(out.text.splitlines()[0]))


def test_processes_that_leave_the_session_are_killed_too(box, ctx, mode):
    # The pid file is written only once the child has its own session.
    out = bash(box, ctx, f"setsid sh -c '{HOST_PID} > esc.pid; exec sleep 60' & "
                         "while [ ! -s esc.pid ]; do sleep 0.05; done; cat esc.pid")
    assert gone(int(out.text.splitlines()[0]))
    assert out.data["sandbox"]["pid_namespace"] is (mode == "pid_namespace")
    if mode == "fallback":  # found through the output pipe it still held
        assert out.data["escaped_killed"] == 1 and "were killed" in out.text
    else:  # gone with the namespace, before anything had to look for it
        assert out.data["escaped_killed"] == 0


def test_a_detached_process_cannot_outlive_the_command(box, ctx, ws):
    if not pid_namespace_available():
        pytest.skip("no PID namespace here (it needs CAP_SYS_ADMIN)")
    # It leaves the session and closes the output, so only the namespace can find it.
    survivor = (f"{HOST_PID} > surv.pid; sleep 2; chmod u+w model.py; echo hacked > model.py; "
                "echo alive > late.txt; exec sleep 123")
    out = bash(box, ctx, f"setsid bash -c '{survivor}' >/dev/null 2>&1 </dev/null & "
                         "while [ ! -s surv.pid ]; do sleep 0.05; done; echo started")
    assert out.text == "started\n[exit code 0]" and out.data["sandbox"]["pid_namespace"] is True
    assert "PID namespace of its own" in out.data["sandbox"]["processes"]
    pid = int((ws / "surv.pid").read_text())
    time.sleep(3)
    assert gone(pid)
    assert not (ws / "late.txt").exists()
    assert (ws / "model.py").read_text() == "original model.py\n"
    assert stat.S_IMODE((ws / "model.py").stat().st_mode) == 0o444


def test_the_sandbox_says_whether_it_has_a_pid_namespace(box, ctx, mode):
    sandbox = bash(box, ctx, "true").data["sandbox"]
    assert sandbox["pid_namespace"] is (mode == "pid_namespace")
    assert sandbox["processes"].startswith("a PID namespace" if mode == "pid_namespace" else "no PID namespace")


def test_on_the_cuda_backend_commands_get_no_pid_namespace(box, ctx):
    """The CUDA driver does not start in a PID namespace whose /proc is the machine's, and the
    agent's scripts on a GPU use it: there the command runs without one, and says why."""
    from types import SimpleNamespace

    sandbox = bash(box, replace(ctx, judge=SimpleNamespace(backend="cuda")), "true").data["sandbox"]
    assert sandbox["pid_namespace"] is False and "CUDA driver" in sandbox["processes"]


def test_long_output_keeps_head_and_tail(box, ctx, mode):
    out = bash(box, ctx, "echo START; yes middle-line | head -n 200000; echo END")
    assert out.text.startswith("START\n") and out.text.endswith("END\n[exit code 0]")
    assert "characters cut from the middle" in out.text
    assert len(out.text) < ctx.limits.max_output_chars + 100
    assert out.data["output_chars"] == len("START\n") + 200000 * len("middle-line\n") + len("END\n")


@needs_landlock
def test_writes_only_in_the_workspace_and_scratch(box, ctx, ws, tmp_path):
    outside = tmp_path / "outside.txt"
    out = bash(box, ctx, f"echo x > {outside}; echo y > $HOME/notes.txt; echo z > $TMPDIR/t; "
                         "echo k > kernels/k.cpp; echo done")
    assert not outside.exists()
    assert (ctx.scratch / "notes.txt").read_text() == "y\n" and (ctx.scratch / "t").exists()
    assert (ws / "kernels" / "k.cpp").read_text() == "k\n"
    assert "Permission denied" in out.text and out.text.endswith("done\n[exit code 0]")
    assert out.data["sandbox"]["filesystem"].startswith("Landlock")


@needs_landlock
def test_shared_memory_is_not_writable_but_device_nodes_are(box, ctx):
    # /dev/shm is shared by every process on the machine: a channel between episodes.
    out = bash(box, ctx, "echo x > /dev/shm/episode-note; echo $?; echo y > /dev/null; echo $?")
    assert not Path("/dev/shm/episode-note").exists()
    assert "Permission denied" in out.text
    assert out.text.splitlines()[-3:] == ["1", "0", "[exit code 0]"], out.text


@needs_landlock
def test_hidden_paths_are_unreadable(box, ctx):
    hidden = ctx.hidden[0]
    out = bash(box, ctx, f"cat {hidden}/secret.txt; ls {hidden}; cp -r {hidden} kernels/; "
                         f"grep -rs secret {hidden.parent}/*")
    assert "the-secret-seed" not in out.text
    assert "secret.txt" not in out.text.replace(f"{hidden}/secret.txt", "")  # not listed
    assert out.text.count("Permission denied") >= 3
    assert not (ctx.workspace / "kernels" / "hidden" / "secret.txt").exists()


@needs_landlock
def test_a_workspace_inside_a_hidden_directory_stays_usable(box, ctx, ws, tmp_path):
    ctx.hidden = [tmp_path]  # an episode directory that holds the workspace and the scratch
    (tmp_path / "trajectory.jsonl").write_text("private")
    out = bash(box, ctx, f"echo k > kernels/k.cpp && cat kernels/k.cpp && cat {tmp_path}/trajectory.jsonl")
    assert out.text.startswith("k\n") and "Permission denied" in out.text and "private" not in out.text


def test_no_network(box, ctx):
    sandbox = asyncio.run(shell.build_sandbox(ctx))
    sandbox.close()
    if sandbox.description["network"].startswith("NOT"):
        pytest.skip("neither a network namespace nor Landlock's TCP rules are available here")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        probe = (f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
                 "print('CONNECTED')")
        out = bash(box, ctx, f'python3 -c "{probe}"')
    finally:
        server.close()
    assert "CONNECTED" not in out.text and out.data["exit_code"] != 0


def test_runs_unconfined_where_landlock_is_unavailable_and_says_so(box, ctx, monkeypatch):
    def unavailable(*args, **kwargs):
        raise LandlockError("Landlock is not available in this kernel")

    monkeypatch.setattr(shell, "build_ruleset", unavailable)
    out = bash(box, ctx, "echo hello")
    assert out.text.startswith("hello") and out.data["exit_code"] == 0
    assert out.data["sandbox"]["filesystem"].startswith("not confined")


@pytest.mark.parametrize("attack", [
    "rm -f model.py SKILL.md",
    "chmod u+w model.py SKILL.md && echo hacked > model.py && echo hacked > SKILL.md",
    "rm -f model.py SKILL.md && ln -s /etc/hostname model.py && mkdir SKILL.md && touch SKILL.md/x",
    "chmod 777 model.py SKILL.md",
])
def test_protected_files_are_restored(box, ctx, ws, attack, mode):
    out = bash(box, ctx, attack)
    for name in ("model.py", "SKILL.md"):
        path = ws / name
        assert not path.is_symlink() and path.is_file()
        assert path.read_text() == f"original {name}\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
        assert f"protected file {name} was restored; it belongs to the judge" in out.text
    assert sorted(out.data["restored"]) == ["SKILL.md", "model.py"]
    assert "restored" not in bash(box, ctx, "cat model.py").text  # untouched: nothing to say


def test_twenty_concurrent_calls_share_one_event_loop(box, ctx):
    async def main() -> tuple[list[ToolOutput], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        tick = asyncio.create_task(ticker())
        outs = await asyncio.gather(*(abash(box, ctx, f"sleep 1; echo call-{i}") for i in range(20)))
        tick.cancel()
        return outs, ticks

    started = time.monotonic()
    outs, ticks = asyncio.run(main())
    assert time.monotonic() - started < 15
    assert [o.text for o in outs] == [f"call-{i}\n[exit code 0]" for i in range(20)]
    assert ticks >= 10  # the loop kept running while the commands did


def test_empty_command_is_refused(box, ctx):
    out = bash(box, ctx, "   ")
    assert out.is_error and "empty" in out.text
    assert os.path.isdir(ctx.workspace)
