"""The bash tool: one command in a fresh, sandboxed shell in the workspace.

The sandbox is the judge's own (``judge.sandbox`` and ``judge.landlock``): a scrubbed environment
with a private HOME and TMPDIR, a new network namespace where the OS allows it, a Landlock
ruleset that allows writes only beneath the workspace, the scratch directory and /dev, hides the
episode's private paths and blocks TCP, and no capabilities when running as root. Where the OS
allows it the command runs in a PID namespace of its own, whose init is a small wrapper: when the
command ends or times out the init exits and the kernel kills everything else in the namespace,
so nothing it started (setsid, nohup, double forks) outlives the call. Without the namespace,
every process in the command's session is killed, and so is any that left the session but
still holds the command's output open. The protected files are saved before the command and
restored afterwards if it changed them.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...files import write_atomic
from ...judge.landlock import LandlockError, build_ruleset
from ...judge.sandbox import (ProcessKind, SandboxPolicy, make_preexec, own_namespace, policy_for, worker_environment,
                              writable_devices)
from ..text import CUT_NOTICE, cap_text
from .base import Tool, ToolContext, ToolError, ToolOutput

READ_CHUNK = 65_536
GRACE_S = 0.25         # after the command ends: how long its output may take to close
DRAIN_S = 2.0          # ... and after killing processes that left its session but kept it open


# -- output -----------------------------------------------------------------------------------
class HeadTail:
    """Keeps the first and last ``limit`` bytes of a stream and counts the rest, so a command
    that prints gigabytes costs no more memory than one that prints a page."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.limit:
                del self.tail[:-self.limit]

    def text(self, limit_chars: int) -> str:
        """The output, capped at ``limit_chars`` with a notice of how much was cut."""
        kept_tail = bytes(self.tail[-self.limit:]) if self.limit else b""
        dropped = self.total - len(self.head) - len(kept_tail)
        if dropped <= 0:
            return cap_text((bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace"), limit_chars)
        head = bytes(self.head).decode("utf-8", "replace")
        tail = kept_tail.decode("utf-8", "replace")
        room = max(limit_chars - len(CUT_NOTICE.format(cut=self.total)), 2)
        shown_head, shown_tail = head[:room // 2], tail[max(0, len(tail) - (room - room // 2)):]
        cut = dropped + len(head) - len(shown_head) + len(tail) - len(shown_tail)
        return shown_head + CUT_NOTICE.format(cut=cut) + shown_tail


# -- the sandbox ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _cuda_bin() -> str | None:
    from ...judge.toolchain import find_cuda_home

    home = find_cuda_home()
    return str(home / "bin") if home else None


def shell_environment(ctx: ToolContext, cuda_bin: str | None) -> dict[str, str]:
    """The command's environment: the judge's scrubbed one, HOME and TMPDIR in the scratch
    directory, and the CUDA toolkit on PATH when there is one."""
    env = worker_environment(ctx.scratch)
    if cuda_bin:
        env["PATH"] = f"{cuda_bin}{os.pathsep}{env['PATH']}"
        env["CUDA_HOME"] = str(Path(cuda_bin).parent)
    return env


@dataclass
class _Sandbox:
    policy: SandboxPolicy
    description: dict[str, Any]
    ruleset: Any = None  # the Landlock ruleset to close once the child has started

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()


@dataclass(frozen=True)
class Namespaces:
    network: bool = False
    pid: bool = False


_namespace_probe: dict[str, Namespaces] = {}


async def namespaces() -> Namespaces:
    """Which namespaces a child can get here (probed once per process): unshare fails silently
    without CAP_SYS_ADMIN, so the child's own namespace links are compared with ours."""
    if "ok" not in _namespace_probe:
        policy = SandboxPolicy(isolate_network=True, new_pid_namespace=True, drop_capabilities=os.geteuid() == 0,
                               kind=ProcessKind.AGENT_SHELL)
        found = Namespaces()
        try:
            proc = await asyncio.create_subprocess_exec(
                "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin"}, start_new_session=True, preexec_fn=make_preexec(policy))
            try:
                found = Namespaces(own_namespace(proc.pid, "net"), own_namespace(proc.pid, "pid_for_children"))
            finally:
                proc.stdin.close()
                await proc.wait()
        except Exception:  # noqa: BLE001 - any failure to start the probe means no namespace
            found = Namespaces()
        _namespace_probe["ok"] = found
    return _namespace_probe["ok"]


async def build_sandbox(ctx: ToolContext) -> _Sandbox:
    """The policy for one command, and what it applies, in words."""
    root = os.geteuid() == 0
    writable = [ctx.workspace.resolve(), ctx.scratch.resolve()]
    ruleset = None
    try:
        ruleset = await asyncio.to_thread(build_ruleset, writable, [], list(ctx.hidden), writable_devices())
        filesystem = ruleset.description
    except (LandlockError, OSError) as exc:
        filesystem = f"not confined: Landlock is unavailable ({exc}); writes outside the workspace are possible"
    try:
        spaces = await namespaces()
    except BaseException:
        if ruleset is not None:
            ruleset.close()
        raise
    cuda = getattr(ctx.judge, "backend", None) == "cuda"
    policy = policy_for(ProcessKind.AGENT_SHELL, backend="cuda" if cuda else "cpu",
                        landlock_fd=ruleset.fd if ruleset else -1, pid_namespaces=spaces.pid)
    pid = policy.new_pid_namespace  # none on cuda: the CUDA driver, which the agent's scripts use, fails in one
    tcp_blocked = ruleset is not None and ruleset.abi >= 4
    if spaces.network:
        network = "isolated: a network namespace of its own (loopback only)"
    elif tcp_blocked:
        network = "TCP blocked by Landlock (no network namespace: that needs CAP_SYS_ADMIN)"
    else:
        network = "NOT isolated: neither a network namespace nor Landlock's TCP rules are available"
    description = {
        "filesystem": filesystem,
        "network": network,
        "privileges": "uid 0 without capabilities" if root else f"unprivileged (uid {os.geteuid()})",
        "environment": "scrubbed; HOME and TMPDIR in the scratch directory",
        "processes": ("a PID namespace of its own: everything the command starts is killed when it ends"
                      if pid else
                      f"no PID namespace ({'the CUDA driver does not start in one' if cuda else 'that needs CAP_SYS_ADMIN'}"
                      "): its session is killed when it ends, and so are processes still holding its output; "
                      "others that detached may survive"),
        "pid_namespace": pid,
    }
    return _Sandbox(policy, description, ruleset)


# -- protected files --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Snapshot:
    data: bytes
    mode: int


def snapshot_protected(ctx: ToolContext) -> dict[str, _Snapshot]:
    """The protected files' content and permissions, for the regular files among them."""
    root = ctx.workspace.resolve()
    saved: dict[str, _Snapshot] = {}
    for rel in sorted(ctx.protected):
        path = root / rel
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            saved[rel] = _Snapshot(path.read_bytes(), stat.S_IMODE(info.st_mode))
        except OSError:
            continue
    return saved


def _unchanged(path: Path, snap: _Snapshot) -> bool:
    try:
        info = path.lstat()
        return (stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == snap.mode
                and path.read_bytes() == snap.data)
    except OSError:
        return False


def _remove(path: Path) -> None:
    """Whatever now stands at ``path`` (file, link, directory tree), never following links."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def _restore(root: Path, rel: str, snap: _Snapshot) -> None:
    path = root / rel
    parent = path.parent
    if parent != root and (parent.is_symlink() or not parent.is_dir()):
        if parent.exists() or parent.is_symlink():
            _remove(parent)
        parent.mkdir(parents=True)
    if path.exists() or path.is_symlink():
        _remove(path)
    write_atomic(path, snap.data, snap.mode)


def restore_protected(ctx: ToolContext, saved: dict[str, _Snapshot]) -> list[str]:
    """Put back every protected file the command changed, deleted or replaced; their names."""
    root = ctx.workspace.resolve()
    restored = []
    for rel, snap in saved.items():
        if not _unchanged(root / rel, snap):
            _restore(root, rel, snap)
            restored.append(rel)
    return restored


# -- running ----------------------------------------------------------------------------------
# The program exec'd in a new PID namespace (see pid_init.py). Run by path with -I -S: nothing
# from the workspace or site-packages is imported into it.
PID_INIT = Path(__file__).with_name("pid_init.py")


def _argv(command: str, policy: SandboxPolicy) -> list[str]:
    if policy.new_pid_namespace:
        return [sys.executable, "-I", "-S", str(PID_INIT), command]
    return ["bash", "-c", command]


@dataclass
class _Run:
    exit_code: int | None = None
    timed_out: bool = False
    escaped_killed: int = 0  # processes that left the session but kept the output open: killed
    escaped: bool = False    # and whether the output stayed open even so
    output: HeadTail = field(default_factory=lambda: HeadTail(0))
    seconds: float = 0.0


async def _within(awaitable: Any, seconds: float) -> bool:
    try:
        await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError:
        return False
    return True


def _kill_pipe_holders(inode: int) -> int:
    """Kill every other process holding the output pipe open; how many there were."""
    target, me, killed = f"pipe:[{inode}]", os.getpid(), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            holds = any(os.readlink(fd) == target for fd in (entry / "fd").iterdir())
        except OSError:
            continue  # gone, or not ours to inspect
        if holds:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_sandboxed(command: str, ctx: ToolContext, sandbox: _Sandbox, env: dict[str, str],
                        timeout_s: float) -> _Run:
    """Run ``bash -c command`` under ``sandbox``; stdout and stderr interleaved in one pipe."""
    loop = asyncio.get_running_loop()
    run = _Run(output=HeadTail(ctx.limits.max_output_chars))
    read_fd, write_fd = os.pipe()
    eof = asyncio.Event()

    def on_readable() -> None:
        try:
            chunk = os.read(read_fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            run.output.add(chunk)
        else:
            loop.remove_reader(read_fd)
            eof.set()

    started = time.monotonic()
    proc = None
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *_argv(command, sandbox.policy), stdin=asyncio.subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                cwd=ctx.workspace, env=env, start_new_session=True, preexec_fn=make_preexec(sandbox.policy))
        finally:
            os.close(write_fd)
            sandbox.close()
        os.set_blocking(read_fd, False)
        loop.add_reader(read_fd, on_readable)
        try:
            run.exit_code = await asyncio.wait_for(proc.wait(), timeout_s)
        except asyncio.TimeoutError:
            run.timed_out = True
        _kill_group(proc.pid)  # background jobs end with the command; nothing outlives a call
        if run.timed_out:
            await proc.wait()
        if not await _within(eof.wait(), GRACE_S):
            # Only without a PID namespace: something that left the session (setsid, nohup)
            # still holds the output open.
            run.escaped_killed = await asyncio.to_thread(_kill_pipe_holders, os.fstat(read_fd).st_ino)
            run.escaped = not await _within(eof.wait(), DRAIN_S)
    finally:
        if proc is not None and proc.returncode is None:
            _kill_group(proc.pid)
        loop.remove_reader(read_fd)
        os.close(read_fd)
        run.seconds = time.monotonic() - started
    return run


def _exit_line(code: int | None) -> str:
    if code is None:
        return "[no exit code: the command was killed]"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"[exit code {code}: killed by {name}]"
    return f"[exit code {code}]"


class BashTool(Tool):
    name = "bash"
    description = (
        "Run a command with `bash -c` in the workspace directory and return its output (stdout and "
        "stderr interleaved) and exit code. Every call starts a fresh shell: cd, exported variables "
        "and shell functions do not carry over to the next call, so chain steps with && in one "
        "command. Processes left running in the background are killed when the command ends. "
        "Sandboxed: no network; files can be written only in the workspace and in $HOME/$TMPDIR "
        "(a private scratch directory); some paths outside the workspace are hidden. Changes to "
        "the protected files (model.py, SKILL.md, binding_registry.h, binding.cpp) are undone "
        "after the command. Time limit: timeout_s seconds (default and maximum {max_timeout:g}); "
        "a command that runs longer is killed with everything it started. Output longer than "
        "{max_chars} characters keeps its beginning and end. Use compile, verify and profile to "
        "judge the solution, and read, edit and write for files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0,
                          "description": "Seconds before the command is killed (capped at the maximum)."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, max_timeout_s: float = 300.0, max_output_chars: int = 20_000) -> None:
        self.description = self.description.format(max_timeout=max_timeout_s, max_chars=max_output_chars)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = args["command"]
        if not command.strip():
            raise ToolError("the command is empty; give a bash command line, e.g. `ls -la kernels`")
        limit = ctx.limits.bash_timeout_s
        timeout_s = min(float(args.get("timeout_s") or limit), limit)
        ctx.scratch.mkdir(parents=True, exist_ok=True)
        cuda_bin = await asyncio.to_thread(_cuda_bin)
        sandbox = await build_sandbox(ctx)
        try:
            saved = snapshot_protected(ctx)
            try:
                run = await run_sandboxed(command, ctx, sandbox, shell_environment(ctx, cuda_bin), timeout_s)
            finally:
                restored = restore_protected(ctx, saved)
        finally:
            sandbox.close()
        return _report(run, restored, sandbox, timeout_s, ctx)


def _report(run: _Run, restored: list[str], sandbox: _Sandbox, timeout_s: float, ctx: ToolContext) -> ToolOutput:
    output = run.output.text(ctx.limits.max_output_chars).rstrip("\n")
    parts: list[str] = []
    if run.timed_out:
        parts.append(f"the command timed out after {timeout_s:g} s and was killed, with every process it "
                     "started. Run something shorter, or in smaller steps, or pass a larger timeout_s "
                     f"(at most {ctx.limits.bash_timeout_s:g}). Output until then:")
    parts.append(output if output else "(no output)")
    if not run.timed_out:
        parts.append(_exit_line(run.exit_code))
    if run.escaped_killed:
        parts.append(f"[{run.escaped_killed} process(es) that left the command's session were killed; "
                     "nothing started by a command outlives it]")
    if run.escaped:
        parts.append("[a process kept the output open after the command ended; the rest of its output "
                     "is discarded]")
    parts += [f"protected file {rel} was restored; it belongs to the judge" for rel in restored]
    data = {"exit_code": run.exit_code, "timed_out": run.timed_out, "duration_s": round(run.seconds, 3),
            "output_chars": run.output.total, "escaped_killed": run.escaped_killed, "restored": restored,
            "sandbox": sandbox.description}
    return ToolOutput("\n".join(parts), is_error=run.timed_out, data=data)
