"""Start, talk to and reliably stop worker processes.

Every request has a deadline; a worker that misses it, dies, exceeds its memory limit or sends a
malformed reply is killed with its whole process group, and the caller gets an exception that
says which of these happened. Nothing a worker does can raise anything else in the judge.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocol
from .sandbox import SandboxPolicy, make_preexec, worker_environment

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
LOG_TAIL_BYTES = 4000
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class WorkerError(Exception):
    """A worker failed a request. ``kind`` is a verdict status; ``message`` says why."""

    def __init__(self, kind: str, message: str, log_tail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.log_tail = log_tail


@dataclass
class WorkerSpec:
    role: str                  # reference | candidate
    run_dir: Path              # private directory: HOME, TMPDIR and the log live here
    policy: SandboxPolicy
    env: dict[str, str]
    memory_limit_bytes: int | None = None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except (ValueError, TypeError):
        return f"signal {-returncode}"


class WorkerProcess:
    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.home = spec.run_dir / f"{spec.role}-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_path = spec.run_dir / f"{spec.role}.log"
        self._oom = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"judge-{spec.role}")
        self.proc: subprocess.Popen | None = None
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
                     "from cuda_agent.judge.worker import main; main()")
        env = worker_environment(self.home, self.spec.env)
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", bootstrap, str(to_child_r), str(from_child_w), PACKAGE_PARENT],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd=self.home, pass_fds=(to_child_r, from_child_w), start_new_session=True,
                preexec_fn=make_preexec(self.spec.policy),
            )
        finally:
            log.close()
            os.close(to_child_r)
            os.close(from_child_w)
        self._send_fd, self._recv_fd = to_child_w, from_child_r
        if self.spec.memory_limit_bytes:
            threading.Thread(target=self._watch_memory, daemon=True).start()

    # -- supervision ------------------------------------------------------------------------
    def _watch_memory(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        while self.proc.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        if int(line.split()[1]) * 1024 > self.spec.memory_limit_bytes:
                            self._oom.set()
                            self.kill()
                        break
            except (OSError, ValueError):
                return
            time.sleep(0.1)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
                return fh.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _exchange(self, message: dict, max_bytes: int) -> dict:
        protocol.send(self._send_fd, message)
        return protocol.receive(self._recv_fd, max_bytes)

    def _death_reason(self) -> str:
        if self._oom.is_set():
            limit = self.spec.memory_limit_bytes / 1024**3
            return f"the {self.spec.role} process exceeded its memory limit of {limit:.1f} GiB and was killed"
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"the {self.spec.role} process stopped answering"
        if code < 0:
            return f"the {self.spec.role} process was killed by {_signal_name(code)}"
        return f"the {self.spec.role} process exited with code {code} in the middle of a request"

    def request(self, cmd: str, timeout_s: float, max_bytes: int = 1 << 36, **fields: Any) -> dict:
        """Send a command and wait for its reply; raise WorkerError on any failure."""
        if self.proc.poll() is not None:
            raise WorkerError("runtime_error", self._death_reason(), self.log_tail())
        future = self._executor.submit(self._exchange, {"cmd": cmd, **fields}, max_bytes)
        try:
            reply = future.result(timeout=timeout_s)
        except FutureTimeout:
            self.kill()
            raise WorkerError("timeout", f"`{cmd}` did not finish within {timeout_s:.0f} s; the "
                              f"{self.spec.role} process was killed", self.log_tail()) from None
        except (protocol.ProtocolError, OSError) as exc:
            self.kill()
            reason = self._death_reason()
            if self.proc.returncode is None or "exited with code 0" in reason:
                reason = f"the {self.spec.role} process broke the judge protocol ({exc})"
            raise WorkerError("runtime_error", reason, self.log_tail()) from None
        if not isinstance(reply, dict) or "ok" not in reply:
            self.kill()
            raise WorkerError("runtime_error", f"malformed reply from the {self.spec.role} process")
        if not reply["ok"]:
            raise WorkerError(str(reply.get("error", "runtime_error")), str(reply.get("message", "")),
                              self.log_tail())
        return reply

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                fut = self._executor.submit(self._exchange, {"cmd": "exit"}, 1 << 20)
                fut.result(timeout=2)
            except Exception:  # any failure to exit politely ends in a kill below
                pass
        self.kill()
        for fd in (self._send_fd, self._recv_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
