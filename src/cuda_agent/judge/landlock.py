"""Linux Landlock, through its three system calls: confine a process's file system access.

Landlock lets an unprivileged process give up rights for itself and its children, so a worker
can be confined even when the judge has no privileges. The ruleset is built in the judge
(``build_ruleset``), and applied in the child just before it starts Python (``restrict_self``).
A Landlock domain also keeps the process from tracing, or reading the memory of, any process
outside it (the judge), and, from ABI 6, from signalling it.

Rights are granted beneath chosen paths; anything not granted is denied. Reads are granted
everywhere except beneath the paths to hide (walking down to them, granting every sibling on
the way); writes only beneath the paths given.
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14          # ABI 2, ABI 3
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    pass


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable or disabled."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _writes(abi: int) -> int:
    rights = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
              | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _readable_around(hidden: list[Path]) -> list[Path]:
    """Paths whose subtrees together cover the whole tree except the hidden paths."""
    hidden = [h.resolve() for h in hidden]
    grants: list[Path] = []

    def visit(directory: Path) -> None:
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            return
        for entry in entries:
            real = entry.resolve()  # a symlink grants its target: judge it by where it leads
            if any(real == h or h in real.parents for h in hidden):
                continue
            if any(real in h.parents for h in hidden):
                if not entry.is_symlink():
                    visit(entry)  # an ancestor of a hidden path: grant its other children
            else:
                grants.append(entry)

    if hidden:
        visit(Path("/"))
    else:
        grants.append(Path("/"))
    return grants


class Ruleset:
    """An open Landlock ruleset, ready to be applied in a child process."""

    def __init__(self, fd: int, abi: int, description: str):
        self.fd, self.abi, self.description = fd, abi, description

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def build_ruleset(writable: list[Path], readable: list[Path], hidden: list[Path],
                  devices: list[Path] = ()) -> Ruleset:
    """Reads everywhere but beneath ``hidden`` (and beneath ``readable`` even there); writes
    only beneath ``writable``; ``devices`` may be opened for writing but nothing may be made,
    removed or renamed beside them; no TCP (ABI 4+); no signals or abstract sockets out (ABI 6+)."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available in this kernel")
    writes = _writes(abi)
    attr = _RulesetAttr(handled_access_fs=writes | READ,
                        handled_access_net=(NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    ruleset = Ruleset(int(fd), abi, "")
    try:
        grants: dict[Path, int] = {}
        for path in _readable_around(hidden) + [Path(p) for p in readable]:
            grants[path] = grants.get(path, 0) | READ
        for path in writable:
            grants[Path(path)] = grants.get(Path(path), 0) | READ | writes
        for path in devices:
            grants[Path(path)] = grants.get(Path(path), 0) | READ | (writes & (WRITE_FILE | TRUNCATE))
        for path, rights in grants.items():
            _add_rule(ruleset.fd, path, rights)
    except BaseException:
        ruleset.close()
        raise
    hidden_text = f"; hidden: {', '.join(str(h) for h in hidden)}" if hidden else ""
    ruleset.description = (f"Landlock ABI {abi}: writes only beneath {', '.join(str(w) for w in writable)}"
                           + (f"; {len(devices)} device nodes opened for writing" if devices else "")
                           + f"{hidden_text}" + ("; no TCP" if abi >= 4 else "")
                           + ("; no signals to the judge" if abi >= 6 else ""))
    return ruleset


def _add_rule(ruleset_fd: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # vanished or unreadable: nothing to grant
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS  # directory rights on a file are invalid
        if not rights:
            return
        attr = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH),
                         ctypes.byref(attr), ctypes.c_uint32(0)) < 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)


# Paths of the process itself that it must be able to write, granted in the child (where
# /proc/self is the child): the CUDA driver names its threads through /proc/self/task/*/comm.
OWN_WRITABLE = ("/proc/self/task",)


def restrict_self(ruleset_fd: int) -> int:
    """Apply a ruleset to the calling process (in a child, between fork and exec), after
    granting it ``OWN_WRITABLE``.

    Returns 0 on success or the errno; it must not raise, allocate much or import.
    """
    rights = WRITE_FILE | (TRUNCATE if abi_version() >= 3 else 0)
    for path in OWN_WRITABLE:
        try:
            _add_rule(ruleset_fd, Path(path), rights)
        except OSError:
            pass  # the process then runs without it, and reports what fails
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return ctypes.get_errno() or 1
    if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
        return ctypes.get_errno() or 1
    return 0
