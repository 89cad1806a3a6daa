"""Start, talk to and reliably stop worker processes.

Every exchange has a deadline; a worker that misses it, dies, exceeds its memory limit or sends a
malformed reply is killed with its whole process group, and the caller gets a WorkerError that
says which of these happened (a worker the kernel's out-of-memory killer ended, told by the
kernel's count of such kills, included). Nothing a worker does can raise anything else in the judge.
Exchanges run on the caller's thread (non-blocking pipes and select), so the judge's clock around
an exchange measures the exchange and nothing else.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import memory, protocol
from .fork_server import ForkedProcess, ForkRequest, ForkServer, ForkServerError, server_for
from .process_tree import TOKEN_VARIABLE, ProcessTree, launched, new_token, only_child, stat_fields
from .sandbox import SandboxPolicy, make_preexec, worker_environment

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
LOG_TAIL_BYTES = 4000
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
DEFAULT_MAX_REPLY_BYTES = 1 << 36


class WorkerError(Exception):
    """A worker failed an exchange. ``kind`` is a verdict status; ``message`` says why;
    ``out_of_memory``, where memory ended it, who stopped it ("judge": its cap; "kernel": the
    kernel's out-of-memory killer) and the figures."""

    def __init__(self, kind: str, message: str, log_tail: str = "",
                 out_of_memory: dict[str, Any] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.log_tail = log_tail
        self.out_of_memory = out_of_memory


@dataclass
class WorkerSpec:
    name: str                  # what the verdict and the messages call it: candidate, reference-eager, ...
    run_dir: Path              # private directory: HOME, TMPDIR and the log live here
    policy: SandboxPolicy      # its sandbox, made for its kind (``sandbox.policy_for``): trust follows from that
    env: dict[str, str]
    memory_limit_bytes: int | None = None
    python: str = sys.executable  # the interpreter the worker runs
    fork: bool = True             # forked by the fork server (fork_server), else exec'd afresh
    arena_fd: int = -1            # the run's input arena (input_arena), shared with the worker
    compiles: bool = False        # runs torch.compile (a trusted baseline): its compiler may start workers

    @property
    def trusted(self) -> bool:
        """Whether it runs the task's own code (a reference) rather than a candidate's."""
        return self.policy.kind.trusted


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except (ValueError, TypeError):
        return f"signal {-returncode}"


def _group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in the group: children count against the limit too."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = stat_fields(entry.name)  # after the name: state, ppid, pgrp, ...
        try:
            if int(fields[2]) == pgid:
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss in pages
        except (IndexError, ValueError):
            continue
    return total


def home_of(run_dir: Path, name: str) -> Path:
    """A worker's home (and its only writable place) in its run's directory."""
    return run_dir / f"{name}-home"


class WorkerProcess:
    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.home = home_of(spec.run_dir, spec.name)
        self.home.mkdir(parents=True, exist_ok=True)
        if spec.policy.run_as is not None:
            os.chown(self.home, *spec.policy.run_as)  # its only writable place
        self.log_path = spec.run_dir / f"{spec.name}.log"
        self._oom = threading.Event()
        self._sent_kill = False  # the judge signalled a live worker: a SIGKILL is the judge's own
        self.peak_rss_bytes = 0  # the worker process's own high-water mark, read before it ends
        self.rss_seen_bytes = 0  # the memory watcher's last reading of the worker and its children
        self._memory: dict[str, Any] | None = None  # why memory ended it, once it has
        self._oom_kills = memory.oom_kills()  # the kernel's count, to tell its kills from others'
        self.proc: subprocess.Popen | ForkedProcess | None = None
        self._send_fd = self._recv_fd = -1  # the channel, once started
        # One exchange at a time: a group's reference is asked by the threads of its candidates.
        self._channel = threading.Lock()
        self._start()

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        for fd in (to_child_w, from_child_w):
            try:  # larger pipe buffers: state dicts and outputs can be hundreds of megabytes
                fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)
            except OSError:
                pass
        bootstrap = ("import sys; sys.path.insert(0, sys.argv[3]); "
                     "from cuda_agent.judge.worker_main import main; main()")
        self.token = new_token()
        env = worker_environment(self.home, {**self.spec.env, TOKEN_VARIABLE: self.token})
        argv = [self.spec.python, "-I", "-c", bootstrap, str(to_child_r), str(from_child_w), PACKAGE_PARENT]
        inherited = (to_child_r, from_child_w)
        if self.spec.arena_fd >= 0:
            argv.append(str(self.spec.arena_fd))
            inherited += (self.spec.arena_fd,)
        launcher = self.spec.policy.new_pid_namespace or self.spec.policy.subreaper == "launcher"
        if launcher:
            argv = launched(argv, self.spec.python)  # the worker becomes the namespace's init
        log = open(self.log_path, "wb")
        try:
            server = server_for(self.spec.python, self.spec.env) if self.spec.fork else None
            if server is not None:
                self.proc = self._fork(server, env, launcher, [to_child_r, from_child_w, log.fileno()])
            else:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                    cwd=self.home, pass_fds=inherited, start_new_session=True,
                    preexec_fn=make_preexec(self.spec.policy),
                )
        except (OSError, ForkServerError) as exc:  # the interpreter or a sandbox step refused
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            who = f"as uid {self.spec.policy.run_as[0]}" if self.spec.policy.run_as else "in its sandbox"
            raise WorkerError("runtime_error", f"could not start the {self.spec.name} process {who} with "
                              f"{self.spec.python}: {exc}. If that user cannot reach the interpreter, let "
                              "other users read the Python installation or point the judge at one they "
                              "can (JudgeConfig(worker_python=...))") from None
        finally:
            log.close()
            os.close(to_child_r)
            os.close(from_child_w)
        self._send_fd, self._recv_fd = to_child_w, from_child_r
        self.pid = (only_child(self.proc.pid) or self.proc.pid) if launcher else self.proc.pid  # the worker
        self.tree = ProcessTree(self.pid, self.token, own=(self.proc.pid,),
                                watched=not self.spec.trusted,
                                subreaper={"launcher": self.proc.pid, "worker": self.pid}.get(self.spec.policy.subreaper))
        self.survivors: list[int] = []  # processes of the worker's that outlived the kill
        for fd in (self._send_fd, self._recv_fd):
            os.set_blocking(fd, False)  # deadlines are enforced with select
        if self.spec.memory_limit_bytes:
            threading.Thread(target=self._watch_memory, daemon=True).start()

    def _fork(self, server: ForkServer, env: dict[str, str], launcher: bool, fds: list[int]) -> ForkedProcess:
        """Start the worker from the fork server's image (see ``fork_server``): the same sandbox,
        applied after the fork instead of before an exec."""
        request = ForkRequest(env=env, cwd=str(self.home), policy=self.spec.policy, launcher=launcher,
                              affinity=frozenset(os.sched_getaffinity(0)), package_parent=PACKAGE_PARENT,
                              arena=self.spec.arena_fd >= 0, compiles=self.spec.compiles)
        if self.spec.policy.landlock_fd >= 0:
            fds = [*fds, self.spec.policy.landlock_fd]
        if self.spec.arena_fd >= 0:
            fds = [*fds, self.spec.arena_fd]
        return server.spawn(request, fds)

    # -- supervision ------------------------------------------------------------------------
    def _watch_memory(self) -> None:
        # The main process is read often; the whole group (children) once a second, because
        # scanning /proc costs CPU time that would disturb timings on small machines.
        statm = Path(f"/proc/{self.pid}/statm")
        page = os.sysconf("SC_PAGE_SIZE")
        tick = 0
        while self.proc.poll() is None:
            try:
                rss = int(statm.read_text().split()[1]) * page
            except (OSError, IndexError, ValueError):
                return
            if tick % 10 == 0:
                rss = max(rss, _group_rss_bytes(self.proc.pid))
            self.rss_seen_bytes = rss
            if rss > self.spec.memory_limit_bytes:
                self._oom.set()
                self.kill()
                return
            tick += 1
            time.sleep(0.1)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
                return fh.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def _note_peak_rss(self) -> None:
        """Keep the kernel's record of the most memory the worker held (VmHWM), while it lives."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_rss_bytes = max(self.peak_rss_bytes, int(line.split()[1]) * 1024)
        except (OSError, ValueError, IndexError, AttributeError):
            pass  # gone already, or never started

    def kill(self) -> None:
        """Kill the worker's process group, then every process it started, wherever it went."""
        if self.proc is not None and self.proc.poll() is None:
            self._note_peak_rss()
            self._sent_kill = True
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.survivors = self.tree.kill()

    def _failure_reason(self, problem: str) -> str:
        """Why an exchange failed, once the worker is dead or has been killed."""
        name = self.spec.name
        if self._oom.is_set():
            return self._over_cap()
        try:
            code = self.proc.wait(timeout=2)  # did it die by itself?
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            return f"the {name} process broke the judge protocol ({problem}) and was killed"
        if self._oom.is_set():  # the watcher may have killed it while we waited
            return self._over_cap()
        if code == -signal.SIGKILL and not self._sent_kill:
            if memory.killed_for_memory(self._oom_kills, memory.oom_kills()):
                return self._killed_by_kernel()
            held = f"; it held {memory.gib(self.rss_seen_bytes)} when last measured" if self.rss_seen_bytes else ""
            return f"the {name} process was killed by SIGKILL, which the judge did not send{held}"
        if code < 0:
            return f"the {name} process was killed by {_signal_name(code)}"
        return f"the {name} process exited with code {code} in the middle of an exchange"

    def _failure(self, problem: str) -> WorkerError:
        reason = self._failure_reason(problem)
        return WorkerError("runtime_error", reason, self.log_tail(), out_of_memory=self._memory)

    def _over_cap(self) -> str:
        """The judge's cap ended the worker: the cap, and what it held when the watcher saw it."""
        cap, held = self.spec.memory_limit_bytes or 0, max(self.rss_seen_bytes, self.peak_rss_bytes)
        self._memory = {"by": "judge", "limit_bytes": cap, "held_bytes": held}
        advice = ("use less memory (fewer or smaller buffers)"
                  if not self.spec.trusted else
                  "the task needs more: raise the cap (JudgeConfig.memory_limit_bytes) or judge fewer at once")
        return (f"out of memory: the {self.spec.name} process exceeded its memory limit of {memory.gib(cap)} and "
                f"was killed (it held {memory.gib(held)} when the judge measured it; the cap is "
                f"JudgeConfig.memory_limit_bytes, by default the machine's memory shared among the workers of "
                f"the judges running at once): {advice}")

    def _killed_by_kernel(self) -> str:
        """The kernel's out-of-memory killer ended the worker: the machine ran out, not its cap."""
        machine = memory.machine_memory()
        held = self.rss_seen_bytes
        self._memory = {"by": "kernel", "held_bytes": held or None,
                        "machine_bytes": machine.total_bytes if machine else None,
                        "limit_bytes": self.spec.memory_limit_bytes}
        of = machine.describe() if machine else "the machine's memory"
        what = (f"held {memory.gib(held)} of {of} when the kernel's out-of-memory killer ended it" if held
                else f"was ended by the kernel's out-of-memory killer when {of} ran out")
        cap = (f", below its own cap of {memory.gib(self.spec.memory_limit_bytes)}"
               if self.spec.memory_limit_bytes else "")
        return (f"out of memory: the {self.spec.name} process {what} (SIGKILL){cap}: the machine as a whole ran "
                "out. Judge fewer at once, use smaller inputs, or set a lower cap per worker "
                "(JudgeConfig.memory_limit_bytes) so that the judge stops a process before the machine runs out")

    # -- exchanges ----------------------------------------------------------------------------
    def post(self, message: dict[str, Any], timeout_s: float) -> None:
        """Send without waiting for a reply (the start of a multi-message exchange)."""
        try:
            protocol.send(self._send_fd, message, time.monotonic() + timeout_s)
        except protocol.ChannelTimeout:
            self.kill()
            raise WorkerError("timeout", f"the {self.spec.name} process stopped reading its channel",
                              self.log_tail()) from None
        except (protocol.ProtocolError, OSError) as exc:
            raise self._failure(str(exc)) from None

    def exchange(self, message: dict[str, Any], timeout_s: float,
                 max_bytes: int = DEFAULT_MAX_REPLY_BYTES, what: str = "", spin_s: float = 0.0,
                 on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Send ``message`` and wait for the reply; raise WorkerError on any failure.

        ``spin_s``: poll for the reply this long before sleeping (timing steps, see protocol).
        ``on_request``: answers what the worker asks of the judge before it replies (a message with
        a ``request`` field: a single-file solution's build); the time it takes is not the worker's.
        Exchanges from several threads take turns; ``timeout_s`` counts from this one's turn.
        """
        with self._channel:
            return self._exchange(message, timeout_s, max_bytes, what, spin_s, on_request)

    def _exchange(self, message: dict[str, Any], timeout_s: float, max_bytes: int, what: str, spin_s: float,
                  on_request: Callable[[dict[str, Any]], dict[str, Any]] | None) -> dict[str, Any]:
        what = what or str(message.get("cmd") or message.get("step") or "request")
        if self.proc.poll() is not None:
            raise self._failure("it had already stopped")
        deadline = time.monotonic() + timeout_s
        try:
            protocol.send(self._send_fd, message, deadline)
            reply = protocol.receive(self._recv_fd, max_bytes, deadline, spin_s)
            while "request" in reply:
                if on_request is None:
                    raise self._failure(f"a request during `{what}`")
                asked = time.monotonic()
                answer = on_request(reply)
                deadline += time.monotonic() - asked
                protocol.send(self._send_fd, answer, deadline)
                reply = protocol.receive(self._recv_fd, max_bytes, deadline, spin_s)
        except protocol.ChannelTimeout:
            self.kill()
            raise WorkerError("timeout", f"`{what}` did not finish within {timeout_s:.0f} s; the "
                              f"{self.spec.name} process was killed", self.log_tail()) from None
        except (protocol.ProtocolError, OSError) as exc:
            raise self._failure(str(exc)) from None
        if not isinstance(reply.get("ok"), bool):
            self.kill()
            raise self._failure("a reply without a status")
        if not reply["ok"]:
            raise WorkerError(str(reply.get("error", "runtime_error")), str(reply.get("message", "")),
                              self.log_tail())
        return reply

    def request(self, cmd: str, timeout_s: float, max_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
        return self.exchange({"cmd": cmd, **fields}, timeout_s, max_bytes, what=cmd, on_request=on_request)

    def close(self) -> None:
        """End the worker and close its channel; closing again does nothing.

        The channel's descriptors are closed exactly once: a second ``os.close`` of the same
        numbers would close whatever the process (any thread of it) has opened under them since.
        """
        if self._send_fd < 0:
            return
        if self.proc is not None and self.proc.poll() is None:
            self._note_peak_rss()
            try:
                self.exchange({"cmd": "exit"}, 2)
            except WorkerError:  # any failure to exit politely ends in the kill below
                pass
        self.kill()
        fds, (self._send_fd, self._recv_fd) = (self._send_fd, self._recv_fd), (-1, -1)
        for fd in fds:
            os.close(fd)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
