"""A seccomp filter for candidate processes and their compiles: system calls they never need.

The filter is built once in the judge with libseccomp (through ctypes, so that system call names
resolve for whatever architecture this is) and exported as a classic BPF program; the child
installs that program between fork and exec, last of all its sandbox steps, so that the steps
before it (new namespaces) still run. Refused calls fail with EPERM rather than killing the
process, so that a library that probes for a feature carries on without it.

Refused: tracing and reading other processes' memory; namespaces (``unshare``, ``setns``, and
``clone`` with any namespace flag; ``clone3`` reports ENOSYS, so that libc falls back to
``clone``, whose flags a filter can read); mounts; kernel modules, keyrings, BPF, io_uring,
userfaultfd; the clock, the host name, reboot and swap; and Unix-domain sockets (``socket`` with
AF_UNIX): a candidate that is uid 0 without capabilities would otherwise pass the permission check
on root's sockets (a container runtime's, a Ray node's raylet and object store), which file
confinement does not cover. Threads, plain forks and pipes stay allowed.

The CUDA driver opens a Unix-domain socket of its own while it starts, and fails to start without
one. So a candidate's worker is started under the filter without that rule, and adds it itself
(``refuse_late``, to every thread of the process) once the driver is up and before any of the
candidate's code is loaded, together with a rule no compile could take: ``execve`` and
``execveat`` refused, so that the candidate's process runs no program at all (no compiler or
linker: a single-file solution's ``load_inline`` is built by the judge, see inline_extension).
Compiles get the whole filter from the start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
from dataclasses import dataclass

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO_BASE = 0x00050000
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
AF_UNIX = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_TASK_PERF_EVENTS_DISABLE = 31
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(os.uname().machine, 317)

# The CLONE_NEW* flags clone() takes: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
# (NEWTIME shares its bit with clone()'s exit signal and is taken only by clone3 and unshare.)
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

REFUSED = (
    # other processes: tracing, memory, file descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr",
    # the kernel: modules, keyrings, BPF, io_uring, userfaultfd, handles, accounting, logs
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf",
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "fanotify_init",
    "acct", "quotactl", "syslog", "iopl", "ioperm", "uselib", "vhangup",
    # the machine: clocks, names, power, swap
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "reboot", "swapon", "swapoff",
)


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or refused to build the filter."""


@dataclass(frozen=True)
class Filter:
    program: bytes            # struct sock_filter[], ready for PR_SET_SECCOMP
    refused: tuple[str, ...]  # the calls it refuses that this architecture has

    @property
    def description(self) -> str:
        return (f"seccomp: {len(self.refused)} system calls refused (tracing, namespaces, mounts, "
                "kernel modules, keyrings, BPF, io_uring, clocks); clone with namespace flags and Unix-domain "
                "sockets refused")


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp")
    if not name:
        raise SeccompUnavailable("libseccomp is not installed (install the libseccomp2 package, or switch "
                                 "the filter off with JudgeConfig(filter_syscalls=False))")
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_exact_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                                 ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _errno_action(code: int) -> int:
    return SCMP_ACT_ERRNO_BASE | (code & 0xFFFF)


@functools.lru_cache(maxsize=2)
def compiled_filter(unix_sockets: bool = True) -> Filter:
    """The filter, as a BPF program (built once per judge process); ``unix_sockets=False`` leaves
    out the rule on Unix-domain sockets, for a worker that adds it later (``refuse_late``)."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        refused = []
        for name in REFUSED:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not on this architecture
            if lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.EPERM), number, 0, None) != 0:
                raise SeccompUnavailable(f"could not add a rule for {name}")
            refused.append(name)
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for namespace in CLONE_NAMESPACE_FLAGS:
            flags = _ArgCmp(0, SCMP_CMP_MASKED_EQ, namespace, namespace)  # that flag is set
            if lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.EPERM), clone, 1,
                                                ctypes.byref(flags)) != 0:
                raise SeccompUnavailable("could not add the rule for clone's namespace flags")
        if unix_sockets:
            _refuse_unix_sockets(lib, ctx)
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0 and lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.ENOSYS), clone3, 0,
                                                            None) != 0:
            raise SeccompUnavailable("could not add the rule for clone3")
        program = _export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)
    return Filter(program, tuple(refused))


def _refuse_unix_sockets(lib: ctypes.CDLL, ctx: int) -> None:
    sockets = lib.seccomp_syscall_resolve_name(b"socket")
    unix = _ArgCmp(0, SCMP_CMP_EQ, AF_UNIX, 0)
    if sockets >= 0 and lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.EACCES), sockets, 1,
                                                         ctypes.byref(unix)) != 0:
        raise SeccompUnavailable("could not add the rule for Unix-domain sockets")


def _export(lib: ctypes.CDLL, ctx: int) -> bytes:
    fd = os.memfd_create("seccomp-bpf")
    try:
        if lib.seccomp_export_bpf(ctx, fd) != 0:
            raise SeccompUnavailable("seccomp_export_bpf failed")
        os.lseek(fd, 0, os.SEEK_SET)
        program = b""
        while chunk := os.read(fd, 1 << 16):
            program += chunk
    finally:
        os.close(fd)
    return program


def refuse_late(programs: bool = True) -> None:
    """Add the Unix-domain socket rule to this process, all its threads included (the CUDA
    driver's, started before), and with ``programs`` refuse running any program (``execve``,
    ``execveat``); raises SeccompUnavailable if that fails. Also refused from now on: switching off
    the perf events on this process and making it undumpable, either of which would blind the
    judge's CPU sample record of it (``cpu_samples``)."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        _refuse_unix_sockets(lib, ctx)
        prctl = lib.seccomp_syscall_resolve_name(b"prctl")
        for option in (PR_SET_DUMPABLE, PR_TASK_PERF_EVENTS_DISABLE):
            match = _ArgCmp(0, SCMP_CMP_EQ, option, 0)
            if lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.EPERM), prctl, 1, ctypes.byref(match)) != 0:
                raise SeccompUnavailable(f"could not add the rule for prctl option {option}")
        for name in ("execve", "execveat") if programs else ():
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number >= 0 and lib.seccomp_rule_add_exact_array(ctx, _errno_action(errno.EACCES), number, 0,
                                                                 None) != 0:
                raise SeccompUnavailable(f"could not add the rule for {name}")
        program = _export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompUnavailable(f"no_new_privs refused: errno {ctypes.get_errno()}")
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog): every thread at once; a
    # positive result names a thread that could not be synchronised.
    result = libc.syscall(SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(fprog))
    if result != 0:
        raise SeccompUnavailable("installing the late rules (Unix sockets, programs) failed: "
                                 + (f"thread {result} could not take it" if result > 0 else f"errno {ctypes.get_errno()}"))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def installer(program: bytes):
    """A preexec-safe function that installs ``program`` on the calling process; everything it
    needs is allocated here, before the fork. It returns 0 or an errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))

    def install() -> int:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return ctypes.get_errno() or 1
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            return ctypes.get_errno() or 1
        return 0

    install.keep = (buffer, fprog)  # alive as long as the function
    return install


def filters_installed() -> int:
    """How many seccomp filters this process runs under (read inside the worker); -1 unknown."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Seccomp_filters:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1
