"""Every process a candidate starts ends with its judge, and the judge says when one did not.

Where the judge may make PID namespaces (root, or CAP_SYS_ADMIN), a candidate's worker is the
init of one: the sandbox's preexec step unshares the namespace and execs a small launcher
(``LAUNCHER``) whose one child, the worker, becomes the namespace's pid 1. Every process the
candidate starts, however it detaches (``setsid``, double forks), lives in that namespace, and
when the worker dies the kernel kills all of them; the worker dies with its launcher (a
parent-death signal). The worker itself must be inside the namespace, not only its children: a
process whose children go to another PID namespace cannot start threads, and the CUDA driver,
OpenMP and the profiler all do.

Where no namespace can be made, and on the CUDA backend, a child subreaper keeps the tree
instead: a process that detaches (``setsid``, double forks) is reparented to it, not to the
machine's init, so every process the candidate starts stays in its subtree, where the judge finds
it. On the CPU backend that is the launcher. On CUDA it is the worker itself, which makes itself a
subreaper once the CUDA driver is up, before any of the candidate's code is loaded: the driver
does not start in a PID namespace whose ``/proc`` is the machine's (it looks itself up by the pid
the namespace gives it; a ``/proc`` of the namespace's own would have to be mounted by its init
before the sandbox takes its privileges), and on the GPU machine it did not start below the
launcher in the candidate's sandbox either (CUDA error 304, an OS call failed), though it does
below the launcher alone: which step of the two together it trips on is not yet known. A
candidate's native code can
undo the worker's subreaper flag, and its orphans then escape to the machine's init, which is
why each worker also carries a token in its environment,
which its children inherit, and the judge finds them by that too; native code that overwrites its
own environment before forking escapes the token alone, which is why the verdict records which
method held.

The judge asks ``ProcessTree.strays`` at its checkpoints: any process of the candidate's besides
its worker is a violation, and one alive during another candidate's timing makes that timing
untrustworthy.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
import weakref
from pathlib import Path

TOKEN_VARIABLE = "CUDA_AGENT_WORKER_TOKEN"

# What the launcher does once its worker runs (also ``fork_server``, which forks the worker
# without an exec): given the worker's ``pid``, hold no channel of the judge's, take in the
# worker's orphans (a child subreaper), and exit as the worker did.
LAUNCHER_REAP = """\
os.closerange(3, 1 << 16)
while True:
    try:
        status = os.waitpid(pid, 0)[1]
        break
    except InterruptedError:
        pass
def orphans():
    try:
        return [int(p) for p in open(f"/proc/self/task/{os.getpid()}/children").read().split()]
    except OSError:
        return []
while left := orphans():  # what the worker left running ends here, not under the machine's init
    for child in left:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two take no handler (EINVAL)
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
"""

# Run as ``python -I -S -c LAUNCHER <worker argv>``. It forks the worker (pid 1 of the new
# namespace, where there is one), holds no channel of the judge's, takes in the worker's orphans
# (a child subreaper), and exits as the worker did.
LAUNCHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pid = os.fork()
if pid == 0:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the launcher
    os.execv(sys.argv[1], sys.argv[1:])
""" + LAUNCHER_REAP


def new_token() -> str:
    return secrets.token_hex(12)


def launched(argv: list[str], python: str) -> list[str]:
    """``argv`` started through the launcher."""
    return [python, "-I", "-S", "-c", LAUNCHER, *argv]


def only_child(pid: int, timeout_s: float = 10.0) -> int | None:
    """The one child ``pid`` forks (the launcher's worker), once it exists; None if none came."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()
                        and stat_fields(entry.name)[1:2] == [str(pid).encode()]]
        if children:
            return int(children[0])
        if time.monotonic() > deadline or not os.path.exists(f"/proc/{pid}"):
            return None
        time.sleep(0.002)


def stat_fields(pid: str | int) -> list[bytes]:
    """The fields of /proc/PID/stat after the name: state, ppid, pgrp, ...; [] if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def cpu_seconds(pid: int, settle_s: float = 0.002) -> float | None:
    """CPU time process ``pid`` has used, all its threads together, those already ended too, to
    the nanosecond (its process CPU clock); None if it is gone.

    The kernel adds a running thread's time to that clock only at a tick or when it stops
    running, so this waits (up to ``settle_s``) for the main thread to stop: a process that has
    just answered and gone back to waiting is then read in full, not short by its last stretch.
    """
    deadline = time.monotonic() + settle_s
    while (fields := stat_fields(pid)) and fields[0] == b"R" and time.monotonic() < deadline:
        pass
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # the kernel's id of the process's CPUCLOCK_SCHED
    except OSError:
        return None


class RunqueueWait:
    """How long one thread has waited for a CPU while ready to run (the kernel's schedstat), in
    ms, read as often as wanted from one open file; ``read`` gives None where the kernel keeps no
    such count or the thread is gone.

    Time a step spent so cannot be work done in it: on a loaded machine it is how a step gets
    longer without anything hidden in it (``timing.load_excuse``).
    """

    def __init__(self, path: str):
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def read(self) -> float | None:
        if self._fd is None:
            return None
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # A session that fails or times out never reaches its finish: its file is not left open.
    __del__ = close


# The kernel's pressure-stall counts (PSI): for how long at least one runnable task waited for a
# CPU, and for memory (reclaim, refaults), machine-wide, in microseconds since boot.
PRESSURE_FILES = ("/proc/pressure/cpu", "/proc/pressure/memory")


def machine_stall_ms() -> list[float] | None:
    """How long, so far, some task on the machine stalled for a CPU and for memory (ms, one
    figure each), or None where the kernel keeps no such count (no PSI)."""
    stalls = []
    for path in PRESSURE_FILES:
        try:
            with open(path) as fh:
                some = fh.readline()  # "some avg10=0.00 avg60=0.00 avg300=0.00 total=N"
            stalls.append(int(some.rsplit("total=", 1)[1]) / 1e3)
        except (OSError, IndexError, ValueError):
            return None
    return stalls


def stalled_fraction(before: list[float] | None, after: list[float] | None, elapsed_s: float) -> float | None:
    """The larger share of ``elapsed_s`` that the machine spent stalled for a CPU or for memory
    between two ``machine_stall_ms`` readings, or None where either is missing."""
    if before is None or after is None or elapsed_s <= 0:
        return None
    return max(a - b for a, b in zip(after, before)) / (elapsed_s * 1e3)


def _namespace(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _environment_has(pid: str, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read()
    except OSError:
        return False


def _descendants(root: int) -> set[int]:
    """Every process below ``root``, by the parent each names in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := stat_fields(entry.name)):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


_live: "weakref.WeakSet[ProcessTree]" = weakref.WeakSet()
_live_lock = threading.Lock()


class ProcessTree:
    """The processes of one worker: its PID namespace where it has one, else its launcher's
    subtree (a subreaper's) and its token.

    ``worker_pid`` is the worker itself; ``own`` are processes of the judge's making around it
    (the launcher), never counted as the candidate's; ``subreaper`` is the child subreaper whose
    subtree holds the candidate's processes (the launcher, or the worker itself), if there is one. A ``watched`` tree (a candidate's) is one whose strays other timings
    look for; a trusted reference's helpers (torch.compile's compile workers, say) are not strays
    of anyone's."""

    def __init__(self, worker_pid: int, token: str, own: tuple[int, ...] = (), watched: bool = True,
                 subreaper: int | None = None):
        self.worker_pid, self.token, self.own = worker_pid, token, {worker_pid, *own}
        self.subreaper = subreaper
        namespace = _namespace(worker_pid)
        self.namespace = namespace if namespace is not None and namespace != _namespace("self") else None
        if watched:
            with _live_lock:
                _live.add(self)

    @property
    def method(self) -> str:
        if self.namespace is not None:
            return "a PID namespace of its own, killed with the judge"
        if self.subreaper is not None:
            return ("the subtree of a child subreaper (detached processes stay in it) and an inherited "
                    "environment token (no PID namespace: not root, or the CUDA backend)")
        return "found by an inherited environment token (no PID namespace: needs root or CAP_SYS_ADMIN)"

    def members(self) -> list[int]:
        """This worker's processes besides the worker itself (and the launcher)."""
        marker = f"{TOKEN_VARIABLE}={self.token}".encode()
        found = []
        below = _descendants(self.subreaper) if self.namespace is None and self.subreaper is not None else set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in self.own:
                continue
            if self.namespace is not None:
                if _namespace(entry.name) == self.namespace:
                    found.append(int(entry.name))
            elif int(entry.name) in below or _environment_has(entry.name, marker):
                found.append(int(entry.name))
        return found

    def strays(self) -> list[int]:
        """Processes the candidate started that are still alive (zombies not counted)."""
        return [pid for pid in self.members() if _alive(pid)]

    def kill(self, wait_s: float = 2.0) -> list[int]:
        """Kill every process of the tree, the worker too (which ends its namespace); return
        those still alive after ``wait_s``."""
        deadline = time.monotonic() + wait_s
        marker = f"{TOKEN_VARIABLE}={self.token}".encode()
        # The worker by its token: once reaped, its pid may already be another process's.
        worker = [self.worker_pid] if _environment_has(str(self.worker_pid), marker) else []
        while True:
            alive = [pid for pid in [*worker, *self.members()] if _alive(pid)]
            if not alive or time.monotonic() > deadline:
                break
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        with _live_lock:
            _live.discard(self)
        return alive


def strays_elsewhere(own: ProcessTree | None) -> int:
    """Processes that other live candidates (watched trees) of this judge process left running."""
    with _live_lock:
        trees = [t for t in _live if t is not own]
    return sum(len(t.strays()) for t in trees)
