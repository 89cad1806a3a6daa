"""Limits and isolation applied to every worker process before it runs any Python.

Applied in the child between fork and exec, in this order: a new session (so the whole process
group can be killed), resource limits, no core dumps, new network and IPC namespaces where the OS
allows them (and, on request, a new PID namespace for the process's children), a Landlock
ruleset (candidates: writes only to their private directory and the device nodes, the judge's
cache hidden, no TCP, no signals out), when the judge runs as root the switch to an unprivileged
user or the loss of every capability, and last a seccomp filter. The environment is rebuilt from
scratch rather than inherited. What was actually applied is measured inside the worker (or read
from /proc by the judge) and recorded, because isolation that silently failed is worse than none.
``CompileSandbox`` gives a solution's compilers the same confinement.

Which process gets which sandbox is decided in one place, :func:`policy_for`, by the kind of
process (:class:`ProcessKind`): the judge's candidate worker and trusted reference workers, a
solution's build, and the agent's shell commands.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import resource
import stat
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Callable, Iterator

from .landlock import build_ruleset, restrict_self
from .seccomp import installer

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
PR_CAPBSET_DROP = 24
_CAPABILITY_VERSION_3 = 0x20080522
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> int:
    """Give up every capability, now and across exec (preexec-safe). Returns 0 or an errno."""
    for cap in range(64):
        _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # past the last capability: EINVAL, ignored
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    return 0 if _LIBC.capset(ctypes.byref(header), data) == 0 else (ctypes.get_errno() or 1)

# Variables a worker may inherit. Everything else (API keys, seeds, paths to the judge's own
# files) is dropped. NCCL/NVSHMEM settings are kept because the host may require them.
_PASSTHROUGH = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES")
_PASSTHROUGH_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_")


UNPRIVILEGED_USER = "nobody"


class ProcessKind(Enum):
    """Every kind of process the judge or the agent starts, by what it runs."""

    REFERENCE = "reference worker"  # the task's own model, the baselines: trusted
    CANDIDATE = "candidate worker"  # the solution's code: untrusted
    BUILD = "build"                 # compilers expanding the solution's sources: untrusted input
    AGENT_SHELL = "agent shell"     # the model's commands in its workspace: untrusted

    @property
    def trusted(self) -> bool:
        return self is ProcessKind.REFERENCE


@dataclass(frozen=True)
class SandboxPolicy:
    isolate_network: bool = True
    # System V shared memory and POSIX message queues are not files, so Landlock does not see
    # them: a new IPC namespace keeps a candidate from leaving anything there. Needs CAP_SYS_ADMIN.
    isolate_ipc: bool = False
    max_open_files: int = 4096
    max_file_bytes: int = 16 * 1024**3
    landlock_fd: int = -1            # an open Landlock ruleset to apply, or -1
    run_as: tuple[int, int] | None = None   # (uid, gid) to switch to; needs root
    drop_capabilities: bool = False  # stay uid 0 (when no other user will do) but without privileges
    max_processes: int = 4096        # threads count too; applied only with run_as (per-user limit)
    # The exec'd program's children start a PID namespace; the first is its init, and when that
    # init exits every process in the namespace is killed. Needs CAP_SYS_ADMIN. The exec'd program
    # itself can then start no threads: judge workers go through ``process_tree.LAUNCHER``.
    new_pid_namespace: bool = False
    # Where no PID namespace is made, who keeps the candidate's detached processes below it as a
    # child subreaper (``process_tree``): "launcher" (run under it all the same), "worker" (the
    # worker makes itself one once the CUDA driver is up; the driver does not start under the
    # launcher), or "" (none).
    subreaper: str = ""
    seccomp_program: bytes | None = None  # a BPF filter (``seccomp``), installed last
    # Whose process this is: what the judge may trust of it follows from this alone. A policy
    # made without saying is a candidate's.
    kind: ProcessKind = ProcessKind.CANDIDATE


def policy_for(kind: ProcessKind, *, backend: str | None = None, isolate_network: bool = True, landlock_fd: int = -1,
               seccomp_program: bytes | None = None, run_as: tuple[int, int] | None = None,
               drop_privileges: bool = True, pid_namespaces: bool | None = None) -> SandboxPolicy:
    """The sandbox of one process of ``kind``: the one place where trust is decided.

    | kind | network | IPC ns | Landlock | privileges (as root) | processes | seccomp |
    |---|---|---|---|---|---|---|
    | reference worker | as configured | no | no | kept | - | no |
    | candidate worker | as configured | yes | given | ``run_as``, else capabilities dropped (unless switched off) | PID namespace (cpu, root), else a subreaper | given |
    | build | as configured | yes | given | capabilities dropped | its session | given |
    | agent shell | isolated | yes | given | capabilities dropped | PID namespace where one can be made (not on cuda) | no |

    The CUDA driver does not start in a PID namespace whose /proc is the machine's, nor below
    the launcher in the candidate's sandbox (``process_tree``): on the cuda backend a candidate's
    worker makes itself the subreaper once the driver is up, and the agent's commands (whose
    scripts use the GPU) get no PID namespace. ``pid_namespaces``: whether this machine lets a
    child make one (None: whether the judge is root). ``landlock_fd`` and ``seccomp_program`` are
    built by the caller for the kind (its writable and hidden paths, its filter);
    ``drop_privileges=False`` (the judge's switch) lets a candidate keep root's capabilities."""
    if backend is None and kind in (ProcessKind.CANDIDATE, ProcessKind.AGENT_SHELL):
        raise ValueError(f"the {kind.value}'s sandbox depends on the backend: pass backend='cpu' or 'cuda'")
    root = os.geteuid() == 0
    cuda = backend == "cuda"
    can_namespace = root if pid_namespaces is None else pid_namespaces
    if kind is ProcessKind.REFERENCE:
        return SandboxPolicy(isolate_network=isolate_network, kind=kind)
    if kind is ProcessKind.CANDIDATE:
        return SandboxPolicy(isolate_network=isolate_network, isolate_ipc=True, landlock_fd=landlock_fd,
                             run_as=run_as, drop_capabilities=root and drop_privileges and run_as is None,
                             new_pid_namespace=can_namespace and not cuda,
                             subreaper="worker" if cuda else "launcher", seccomp_program=seccomp_program, kind=kind)
    if kind is ProcessKind.BUILD:
        return SandboxPolicy(isolate_network=isolate_network, isolate_ipc=True, landlock_fd=landlock_fd,
                             drop_capabilities=root, seccomp_program=seccomp_program, kind=kind)
    return SandboxPolicy(isolate_network=True, isolate_ipc=True, landlock_fd=landlock_fd, drop_capabilities=root,
                         new_pid_namespace=can_namespace and not cuda, kind=kind)


@dataclass(frozen=True)
class CompileSandbox:
    """The sandbox a solution's build runs in: the compilers read the candidate's sources and
    expand its preprocessor directives and templates, so they get the candidate's confinement
    (writes only to the build directory, the judge's files hidden, no network, no privileges,
    the seccomp filter)."""

    hidden: tuple[Path, ...]          # the judge's cache and run directories
    confine_filesystem: bool = True
    isolate_network: bool = True
    seccomp_program: bytes | None = None
    seccomp_note: str = "no seccomp filter: switched off"

    @contextmanager
    def preexec(self, workdir: Path, inputs: list[Path]) -> Iterator[tuple[Callable[[], None], dict]]:
        """(preexec function, what it applies in words) for one build in ``workdir`` that also
        reads ``inputs`` (cached objects, the precompiled header) from the hidden directories."""
        ruleset, filesystem = None, "not confined: switched off"
        if self.confine_filesystem:
            try:
                ruleset = build_ruleset([workdir], readable=list(inputs), hidden=list(self.hidden),
                                        devices=writable_devices())
                filesystem = ruleset.description
            except OSError as exc:
                filesystem = f"not confined: {exc}"
        policy = policy_for(ProcessKind.BUILD, isolate_network=self.isolate_network,
                            landlock_fd=ruleset.fd if ruleset else -1, seccomp_program=self.seccomp_program)
        record = {"filesystem": filesystem, "syscalls": self.seccomp_note,
                  "privileges": "uid 0 without capabilities" if os.geteuid() == 0 else f"uid {os.geteuid()}"}
        try:
            yield make_preexec(policy), record
        finally:
            if ruleset is not None:
                ruleset.close()


def unprivileged_ids() -> tuple[int, int] | None:
    """The (uid, gid) candidates run as when the judge is root; None if there is no such user."""
    import pwd

    try:
        entry = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def world_reachable(path: Path, executable: bool = False) -> bool:
    """Whether any user can reach ``path`` (o+x on every directory above, o+r on it, o+x too for
    an executable), both as named and as its links resolve: a link into a private directory
    is as unreachable as the directory."""
    path = Path(path)
    for candidate in {path.absolute(), path.resolve()}:
        try:
            mode = candidate.stat().st_mode
            if stat.S_ISDIR(mode) or executable:
                if (mode & 0o005) != 0o005:
                    return False
            elif not mode & 0o004:
                return False
            if not all(parent.stat().st_mode & 0o001 for parent in candidate.parents):
                return False
        except OSError:
            return False
    return True


@functools.lru_cache(maxsize=8)
def interpreter_paths(interpreter: str) -> tuple[str, ...]:
    """What ``interpreter`` reads when it starts as a worker does (isolated mode): its prefixes
    and every entry of its import path. Empty if it cannot be asked."""
    probe = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix] + sys.path))"
    try:
        out = subprocess.run([interpreter, "-I", "-c", probe], capture_output=True, text=True, timeout=60)
        entries = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return ()
    return tuple(dict.fromkeys(p for p in entries if p and os.path.exists(p)))


def unreachable_for_others(interpreter: str, extra: list[Path]) -> list[str]:
    """Paths a worker run as another user needs and could not reach: the interpreter itself,
    what it imports from, and ``extra`` (the package, the run directories)."""
    missing = [] if world_reachable(Path(interpreter), executable=True) else [interpreter]
    for path in [*map(Path, interpreter_paths(interpreter)), *extra]:
        if not world_reachable(path) and str(path) not in missing:
            missing.append(str(path))
    return missing


def worker_environment(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: no inherited secrets, a private HOME and TMPDIR."""
    python_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": os.pathsep.join([python_bin, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    for key, value in os.environ.items():
        if key in _PASSTHROUGH or key.startswith(_PASSTHROUGH_PREFIXES):
            env[key] = value
    env.update(extra or {})
    return env


def make_preexec(policy: SandboxPolicy):
    """The function run in the child before exec. It must not allocate much or import."""
    install_filter = installer(policy.seccomp_program) if policy.seccomp_program else None

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (policy.max_open_files, policy.max_open_files))
        resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
        if policy.isolate_network:
            # Fails without CAP_SYS_ADMIN; the worker then reports that it still sees the network.
            _LIBC.unshare(CLONE_NEWNET)
        if policy.isolate_ipc:
            _LIBC.unshare(CLONE_NEWIPC)  # the judge compares namespaces and records the outcome
        if policy.new_pid_namespace:
            # Before capabilities go. Fails without CAP_SYS_ADMIN; the caller checks and reports.
            _LIBC.unshare(CLONE_NEWPID)
        if policy.landlock_fd >= 0:
            # A failure shows in the worker's own write probe, which is what gets recorded.
            restrict_self(policy.landlock_fd)
        if policy.run_as is not None:
            uid, gid = policy.run_as
            resource.setrlimit(resource.RLIMIT_NPROC, (policy.max_processes, policy.max_processes))
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)  # raises if it fails: never run a candidate as root by accident
        elif policy.drop_capabilities and drop_capabilities() != 0:
            raise PermissionError("could not drop capabilities")
        if install_filter is not None:
            # Last: the steps above use calls it refuses. A failure shows in the worker's count
            # of its filters, which is what gets recorded.
            install_filter()

    return preexec


# Device nodes a worker may open for writing: the GPU's (the driver opens them read-write) and
# the harmless character devices. Nothing else under /dev: /dev/shm and /dev/mqueue are shared
# between processes, so a candidate could leave results or state there for a later one.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
                    "/dev/ptmx", "/dev/pts")
GPU_DEVICE_PREFIXES = ("nvidia", "dri")


def writable_devices() -> list[Path]:
    """The device nodes (and device directories) a worker may open for writing, as present here."""
    found = [Path(p) for p in WRITABLE_DEVICES if os.path.exists(p)]
    try:
        found += sorted(Path("/dev") / name for name in os.listdir("/dev") if name.startswith(GPU_DEVICE_PREFIXES))
    except OSError:
        pass
    return found


# File systems that hold files in memory, shared by every process that can reach them.
_SHARED_FS_TYPES = {"tmpfs", "ramfs", "mqueue", "devtmpfs", "hugetlbfs"}
_WELL_KNOWN_SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue", "/run/user")


def shared_places() -> list[Path]:
    """Every place one process could leave a file for another: each in-memory file system
    mounted here, the well-known temporary directories, and every world-writable directory one
    level below /, /var, /run and /dev."""
    places = {Path(p) for p in _WELL_KNOWN_SHARED}
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] in _SHARED_FS_TYPES:
                places.add(Path(fields[1].replace("\\040", " ")))
    except OSError:
        pass
    for top in ("/", "/var", "/run", "/dev"):
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mode & 0o002:
                    places.add(Path(entry.path))
            except OSError:
                continue
    return sorted(p for p in places if p.is_dir())


def writable_outside(home: Path) -> list[str]:
    """The places outside its own ``home`` where this process can create a file: beside the
    home, and every shared place (run inside the worker). Empty when the sandbox holds."""
    home = home.resolve()
    open_places = []
    for place in [home.parent, *shared_places()]:
        if place.resolve() == home:
            continue
        probe = place / f".write-probe-{os.getpid()}"
        try:
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError:
            continue
        os.close(fd)
        try:
            probe.unlink()
        except OSError:
            pass
        open_places.append(str(place))
    return open_places


def own_namespace(pid: int, kind: str) -> bool:
    """Whether process ``pid`` has a ``kind`` namespace (``net``, ``ipc``, ``pid_for_children``)
    other than this process's."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}")
    except FileNotFoundError:
        return kind == "pid_for_children"  # a new PID namespace has no link until its init starts
    except OSError:
        return False


def effective_capabilities() -> int:
    """This process's effective capability mask (run inside the worker); 0 is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return -1


def network_isolated() -> bool:
    """True when this process sees no network interface but loopback (run inside the worker)."""
    # /proc/self/net follows the reader's namespace (sysfs would show the mounter's).
    try:
        lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return {line.split(":", 1)[0].strip() for line in lines} <= {"lo"}
