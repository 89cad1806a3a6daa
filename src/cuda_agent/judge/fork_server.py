"""Start workers by forking a trusted process that has already imported torch.

A worker started with ``exec`` spends seconds importing torch before it does anything (about
1.7 s of CPU on a fast core, more on a loaded one), and a judge starts at least two. The fork
server is a trusted process, started once per interpreter and settings, that imports torch and the
worker's own modules (never CUDA: the driver does not survive a fork) and then only forks: each
worker is a fresh copy of that image, sandboxed after the fork exactly as ``sandbox.make_preexec``
sandboxes an exec'd one, and runs ``worker_main.serve`` directly. Nothing of the candidate's ever
runs in the server, and no worker is reused: isolation is what it was, and a worker starts in tens
of milliseconds.

What differs from exec, and how it is made the same:

* the environment: the worker's own is set after the fork (``os.environ``, which exec'd
  children inherit). ``/proc/PID/environ`` shows what a process was exec'd with, so the server
  starts with a placeholder for the worker's token (``process_tree``) that each child overwrites
  in that memory with its own token: the judge finds a worker, and whatever it forks, as before.
  Variables that libraries read when torch is imported (thread counts, visible devices) are part
  of the server's key, so a worker never inherits another setting's;
* caches a module keeps of the environment (``tempfile``'s directory, ``random``'s state) are
  reset in the child;
* CPU affinity is the requesting thread's, as an exec'd child's would be;
* exit statuses: the server reaps its children and reports each status to the judge, which reads
  them through ``ForkedProcess``, a ``subprocess.Popen`` look-alike.
"""

from __future__ import annotations

import os
import pickle
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from .process_tree import LAUNCHER_REAP, TOKEN_VARIABLE, new_token
from .sandbox import SandboxPolicy

# Read when torch (and the OpenMP and BLAS libraries under it) is imported, or when the CUDA
# driver starts in a way that torch may cache: one server per distinct value of these.
IMPORT_TIME_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "PATH")
# What a worker imports; importing them in the server is what makes a forked worker fast. Not
# torch.utils.cpp_extension: importing it asks whether CUDA is available, which starts the driver,
# and a process forked after that cannot use CUDA. Not torch.compile's front end (torch._dynamo,
# with sympy: 5 s of CPU, as long as torch's own import): only the compile baselines' workers use
# it, and the server imports it when the first of them is asked for (COMPILE_PRELOAD).
PRELOAD = ("torch", "numpy", "torch.autograd.profiler",
           "cuda_agent.device", "cuda_agent.judge.worker_main", "cuda_agent.judge.recording",
           "cuda_agent.judge.correctness", "cuda_agent.judge.audit", "cuda_agent.judge.floor",
           "cuda_agent.judge.device_exchange", "cuda_agent.judge.op_counter",
           "cuda_agent.judge.sandbox", "cuda_agent.judge.seccomp", "cuda_agent.judge.protocol")
# torch.compile, for the compile baselines' workers: its front end with any build; its compiler
# only where torch is a CPU build (each such worker took 10 s longer importing it and probing the
# CPU's vector instructions itself). Not the compiler with a CUDA build: there it starts the CUDA
# driver, and the server's children could not use the GPU.
COMPILE_PRELOAD = ("torch._dynamo",)
CPU_BUILD_PRELOAD = ("torch._inductor.compile_fx",)
INDUCTOR_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
TOKEN_PLACEHOLDER = "0" * len(new_token())
MESSAGE_BYTES = 1 << 20
START_TIMEOUT_S = 300.0  # importing torch on a loaded machine
READY_TIMEOUT_S = 60.0   # from the fork to the sandbox in place: milliseconds, unless the host stalls


class ForkServerError(Exception):
    """The fork server could not be started, stopped answering, or could not start a worker."""


class ForkUnsafe(ForkServerError):
    """The server's image cannot be forked (the CUDA driver started in it): workers are exec'd."""


class ForkFailed(Exception):
    """In the server: a worker did not reach its sandbox."""


@dataclass(frozen=True)
class ForkRequest:
    """One worker to start. The descriptors travel beside it (``socket.send_fds``), in this
    order: the worker's channel in and out, its log, the Landlock ruleset if any, and the input
    arena if any."""

    env: dict[str, str]
    cwd: str
    policy: SandboxPolicy
    launcher: bool                  # fork once more: the worker is the new PID namespace's init
    affinity: frozenset[int]
    package_parent: str
    arena: bool = False             # an input arena follows the other descriptors
    compiles: bool = False          # the worker runs torch.compile (_preload_compiler)


# -- the judge's side ------------------------------------------------------------------------------
class ForkedProcess:
    """A worker forked by the server, with the parts of ``subprocess.Popen`` the judge uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._done = threading.Event()

    def _exited(self, returncode: int) -> None:
        self.returncode = returncode
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class ForkServer:
    """The judge's handle on one fork server process."""

    def __init__(self, python: str, env: dict[str, str], home: Path):
        """``env``: the server's own environment (a worker's, without what differs by worker)."""
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.log_path = home / "fork-server.log"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [python, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[2]); "
                "from cuda_agent.judge.fork_server import serve; serve(int(sys.argv[1]))",
                str(theirs.fileno()), str(Path(__file__).resolve().parents[2])]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env={**env, TOKEN_VARIABLE: TOKEN_PLACEHOLDER},
                                         cwd=home, pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self.sock = ours
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[threading.Event, list]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._next_id = 0
        self._unsafe = ""  # why the server's image cannot be forked, if it cannot
        self.alive = True
        self._ready = threading.Event()
        threading.Thread(target=self._read, name="fork-server-reader", daemon=True).start()
        if not self._ready.wait(START_TIMEOUT_S) or not self.alive:
            why = self.log_tail()
            self.close()
            raise ForkServerError(f"the worker fork server did not start: {why}")
        if self._unsafe:
            self.close()
            raise ForkUnsafe(self._unsafe)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_bytes()[-2000:].decode(errors="replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MESSAGE_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            message = pickle.loads(data)
            kind = message["kind"]
            if kind == "ready":
                self._unsafe = message.get("unsafe", "")
                self._ready.set()
            elif kind in ("started", "failed"):
                with self._lock:
                    event, slot = self._pending.pop(message["id"])
                    if kind == "started":
                        self._children[message["pid"]] = child = ForkedProcess(message["pid"])
                        slot.append(child)
                    else:
                        slot.append(ForkServerError(message["message"]))
                event.set()
            elif kind == "exited":
                with self._lock:
                    child = self._children.pop(message["pid"], None)
                if child is not None:
                    child._exited(message["returncode"])
        # The server is gone: its children are dead or orphaned (the judge kills their groups).
        with self._lock:
            self.alive = False
            children, self._children = list(self._children.values()), {}
            pending, self._pending = list(self._pending.values()), {}
        for child in children:
            child.kill()
            child._exited(-signal.SIGKILL)
        for event, slot in pending:
            slot.append(ForkServerError(f"the worker fork server stopped: {self.log_tail()}"))
            event.set()
        self._ready.set()

    def spawn(self, request: ForkRequest, fds: list[int], timeout_s: float = 60.0) -> ForkedProcess:
        event, slot = threading.Event(), []
        with self._lock:
            if not self.alive:
                raise ForkServerError(f"the worker fork server stopped: {self.log_tail()}")
            self._next_id += 1
            request_id = self._next_id
            self._pending[request_id] = (event, slot)
        data = pickle.dumps({"id": request_id, "request": request})
        try:
            with self._send_lock:
                socket.send_fds(self.sock, [data], fds)
        except OSError as exc:
            with self._lock:
                self._pending.pop(request_id, None)
            raise ForkServerError(f"the worker fork server stopped: {exc}") from None
        if not event.wait(timeout_s):
            raise ForkServerError(f"the worker fork server did not answer within {timeout_s:.0f} s")
        if isinstance(slot[0], Exception):
            raise slot[0]
        return slot[0]

    def close(self) -> None:
        try:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            # Its log and torch.compile's caches (hundreds of MB): nothing a verdict needs, and
            # removed even when the close is cut short, so that they do not pile up.
            shutil.rmtree(self.home, ignore_errors=True)


_servers: dict[tuple, ForkServer] = {}
_unforkable: set[tuple] = set()
_servers_lock = threading.Lock()


def server_for(python: str, extra_env: dict[str, str]) -> ForkServer | None:
    """The running server for this interpreter and the import-time settings among a worker's
    ``extra_env``, started if need be (and again if it died); None where its image cannot be
    forked (workers are then exec'd, as without it)."""
    import atexit
    import tempfile

    from .sandbox import worker_environment

    settings = {name: extra_env[name] for name in IMPORT_TIME_VARIABLES if name in extra_env}
    key = (python, *sorted(settings.items()))
    with _servers_lock:
        if key in _unforkable:
            return None
        server = _servers.get(key)
        if server is not None and not server.alive:
            server.close()  # gone: reap it, remove its directory
        if server is None or not server.alive:
            if not _servers:
                atexit.register(close_servers)
            home = Path(tempfile.mkdtemp(prefix="cuda-agent-fork-server-"))
            try:
                _servers[key] = server = ForkServer(python, worker_environment(home, settings), home)
            except ForkUnsafe as exc:
                print(f"cuda-agent: workers are started by exec: {exc}", file=sys.stderr)
                _unforkable.add(key)
                return None
        return server


def start_soon(python: str, extra_env: dict[str, str]) -> None:
    """Start the server ``server_for`` would give, in the background, so that its imports
    overlap the caller's other work (a judge's build); the first worker's start then waits for it
    as it would have. A server that cannot start is left for that start to report."""

    def start() -> None:
        try:
            server_for(python, extra_env)
        except Exception:  # noqa: BLE001 - the first worker's start tries again and says why
            pass

    threading.Thread(target=start, name="cuda-agent-fork-server-start", daemon=True).start()


def close_servers() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


# -- the server's side -----------------------------------------------------------------------------
def serve(control_fd: int) -> None:
    """The server's main loop: single-threaded, it forks on each request and reports exits."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a worker that needs it will say why, in its own log
            print(f"fork server: could not preload {name}: {exc}", flush=True)
    sock = socket.socket(fileno=control_fd)
    if unsafe := _why_not_fork_safe():
        sock.send(pickle.dumps({"kind": "ready", "unsafe": unsafe}))
        os._exit(0)
    # Python 3.12 warns at every fork of a process with threads; torch's import leaves one of its
    # own, idle, as it does in every process that forks after importing torch (data loaders).
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    sock.send(pickle.dumps({"kind": "ready"}))
    while True:
        for key, _ in selector.select():
            if key.fileobj is sock:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE_BYTES, 8)
                except OSError:
                    data, fds = b"", []
                if not data:
                    os._exit(0)  # the judge is gone
                message = pickle.loads(data)
                try:
                    if message["request"].compiles:
                        _preload_compiler(message["request"].env)
                    pid = _fork(message["request"], fds, sock)
                    reply = {"kind": "started", "id": message["id"], "pid": pid}
                except (OSError, ForkFailed) as exc:
                    reply = {"kind": "failed", "id": message["id"], "message": str(exc)}
                finally:
                    for fd in fds:
                        os.close(fd)
                sock.send(pickle.dumps(reply))
            else:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.send(pickle.dumps({"kind": "exited", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)}))


_compiler_preloaded = False


def _preload_compiler(env: dict[str, str]) -> None:
    """torch.compile, imported (and its compiler's CPU probe made) once, when the first worker
    that compiles is asked for (a judge that times no baseline never pays for it), for every
    later one: its front end with any build, its compiler only where that cannot start a CUDA
    driver (CPU_BUILD_PRELOAD).

    The probe compiles a small program per vector instruction set (about 11 s on two cores) into
    torch.compile's cache: the one the compiling worker uses (``env``), where every later server
    finds them, not the server's private temporary directory, which made every new server (each
    process that judges) compile them again. Workers set their own environment after the fork."""
    import importlib

    import torch

    global _compiler_preloaded
    if _compiler_preloaded:
        return
    _compiler_preloaded = True
    cpu_build = torch.version.cuda is None and getattr(torch.version, "hip", None) is None
    saved = os.environ.get(INDUCTOR_CACHE_VARIABLE)
    if directory := env.get(INDUCTOR_CACHE_VARIABLE):
        os.environ[INDUCTOR_CACHE_VARIABLE] = directory
    try:
        for name in COMPILE_PRELOAD + (CPU_BUILD_PRELOAD if cpu_build else ()):
            importlib.import_module(name)
        if cpu_build:
            from torch._inductor import cpu_vec_isa

            cpu_vec_isa.pick_vec_isa()
    except Exception as exc:  # a compile baseline then imports it itself, and says why if it fails
        print(f"fork server: could not preload torch.compile: {exc}", flush=True)
    finally:
        if saved is None:
            os.environ.pop(INDUCTOR_CACHE_VARIABLE, None)
        else:
            os.environ[INDUCTOR_CACHE_VARIABLE] = saved


def _why_not_fork_safe() -> str:
    """Why a child of this process could not use the GPU: something it imported asked the CUDA
    driver a question (torch then marks its forked children as unable to use CUDA). Asked of a
    forked probe, the way torch itself finds out."""
    import torch

    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    if in_bad_fork is None:  # a build without CUDA
        return ""
    pid = os.fork()
    if pid == 0:
        os._exit(3 if in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return "the CUDA driver was started while the fork server imported its modules"
    return ""


def _fork(request: ForkRequest, fds: list[int], sock: socket.socket) -> int:
    """Fork a worker; return its pid once it is in its own session and sandbox, as
    ``subprocess.Popen`` returns once its child has exec'd (a kill of its process group then
    reaches it). Raises ForkFailed with the reason if it could not get there."""
    sys.stdout.flush()
    sys.stderr.flush()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        try:
            _become_worker(request, fds, sock, ready_w)
        except BaseException as exc:  # said to the server if it is still listening, and in the log
            message = f"{type(exc).__name__}: {exc}"
            try:
                os.write(ready_w, b"E" + message.encode(errors="replace")[:4000])
                print(f"the worker could not be started in its sandbox: {message}", file=sys.stderr, flush=True)
            except Exception:
                pass
        os._exit(1)
    os.close(ready_w)
    try:
        ready, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
        answer = os.read(ready_r, 4096) if ready else b"T"
    finally:
        os.close(ready_r)
    if answer == b"\0":
        return pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if answer.startswith(b"E"):
        raise ForkFailed(answer[1:].decode(errors="replace"))
    if answer == b"T":
        raise ForkFailed(f"the worker did not reach its sandbox within {READY_TIMEOUT_S:.0f} s")
    raise ForkFailed("the worker died before it reached its sandbox")


def _become_worker(request: ForkRequest, fds: list[int], sock: socket.socket, ready_w: int) -> None:
    import random
    import tempfile

    from .sandbox import make_preexec

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock.close()
    fd_in, fd_out, log, *rest = fds
    landlock_fd = rest.pop(0) if request.policy.landlock_fd >= 0 else -1
    arena_fd = rest.pop(0) if request.arena else -1
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    keep = {0, 1, 2, fd_in, fd_out, landlock_fd, arena_fd, ready_w}
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)  # the worker's token among it
    _write_exec_environment_token(request.env[TOKEN_VARIABLE])
    tempfile.tempdir = None
    random.seed()
    os.sched_setaffinity(0, request.affinity)
    make_preexec(replace(request.policy, landlock_fd=landlock_fd))()
    if landlock_fd >= 0:
        os.close(landlock_fd)
    os.write(ready_w, b"\0")
    os.close(ready_w)
    if request.launcher:
        _launch(fd_in, fd_out, request.package_parent, arena_fd)
    _run_worker(fd_in, fd_out, request.package_parent, arena_fd)


def _launch(fd_in: int, fd_out: int, package_parent: str, arena_fd: int) -> None:
    """``process_tree.LAUNCHER`` without the exec: the worker is this process's one child."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the launcher
        _run_worker(fd_in, fd_out, package_parent, arena_fd)
    exec(LAUNCHER_REAP, {"os": os, "signal": signal, "pid": pid})


def _run_worker(fd_in: int, fd_out: int, package_parent: str, arena_fd: int) -> None:
    from . import worker_main

    sys.argv = ["-c", str(fd_in), str(fd_out), package_parent, str(arena_fd)]
    worker_main.serve(fd_in, fd_out, arena_fd)
    os._exit(0)


def _write_exec_environment_token(token: str) -> None:
    """Put the worker's token where ``/proc/PID/environ`` reads it: the environment block this
    process (the server) was exec'd with, which holds the placeholder."""
    import ctypes

    fields = Path("/proc/self/stat").read_bytes().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start and env_end (fields 50 and 51)
    block = Path("/proc/self/environ").read_bytes()
    marker = f"{TOKEN_VARIABLE}={TOKEN_PLACEHOLDER}".encode()
    at = block.find(marker)
    if at < 0 or start + at + len(marker) > end:
        raise RuntimeError("the fork server's environment has no token placeholder")
    value = token.encode()
    ctypes.memmove(start + at + len(marker) - len(value), value, len(value))
