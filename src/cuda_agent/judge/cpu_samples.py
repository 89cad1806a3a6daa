"""Where a candidate's CPU time goes, sampled by the kernel for the trusted side (cpu backend).

NumPy, SciPy or a BLAS library computing a forward dispatches no ATen op and runs none of the
solution's code, so the op counter and the link record (``linked_symbols``) see nothing; only the
static scan did. Everything in the candidate's interpreter can be rewritten by it, so the record
is not taken there: the judge opens the kernel's sampling events (``perf_event_open``, the task
clock, user space only) on each of the candidate process's threads from its own process (threads
started later, inside a call too, inherit them), reads the samples from ring buffers that only it
maps, and places each sampled address in the file mapped there (``/proc/PID/maps``, read by the
judge as each sampled call begins; mappings made during one arrive in the same ring as the
kernel's mmap records). The candidate holds no descriptor of these events, cannot read or
rewrite their buffers, and cannot switch them off: the one call that would
(``prctl(PR_TASK_PERF_EVENTS_DISABLE)``) is refused by its seccomp filter, and so is making itself
undumpable, which would stop the judge opening the events or reading its maps.

The record is on only in sampled calls: calls the judge makes exactly as it makes timed calls
(the same messages, outputs kept and rechecked alike), one in every ``session.SAMPLED_EVERY``,
chosen at random, and whose time is not used, since a sample costs the sampled thread time.
Samples count only inside the judge's own windows around those calls (its clock,
CLOCK_MONOTONIC, is the one the samples carry). A sample counts as another library's compute where
the file it falls in is a Python package's own native code other than torch's (NumPy, SciPy, or
any other installed package), a BLAS or LAPACK library outside torch, or any file outside the
places code may honestly run from (torch, this package, the judge's builds of the solution, the
Python installation, the system's libraries): a library copied under another name into the
candidate's own directory counts too. So does code no file backs (a JIT's: oneDNN's, which
ATen's convolutions and matrix products run). A sample in torch's own libraries is placed in the
function that holds it, and counts where that is ATen's compute (``aten_kernels``), however the
call got there: below the dispatcher by a road no import names, or through it with the op
counter inside the process silenced.
"""

from __future__ import annotations

import bisect
import ctypes
import fcntl
import functools
import mmap
import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..device import SYSFS_CPUS, cpu_list
from . import aten_kernels
from .process_tree import cpu_seconds

# How often the task clock is sampled while the record is on: every 50 us of a thread's CPU time,
# so that calls of a tenth of a millisecond still give the record enough samples to decide. A
# sample is dear in a virtual machine (calls 5-7% longer at a 250 us period on a 2-core one), which
# is why the record is on only in calls whose time is not used (session.py).
PERIOD_NS = 50_000
# Each CPU's ring: 128 KiB, about 4,000 samples (a fifth of a second of that CPU) between two
# reads, which come after every sampled call; fewer pages where the kernel will not lock that much
# (a user may lock only kernel.perf_event_mlock_kb of such rings beyond RLIMIT_MEMLOCK).
RING_PAGES = 32

_SYSCALL = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
_PERF_TYPE_SOFTWARE, _PERF_COUNT_SW_TASK_CLOCK = 1, 1
_SAMPLE_IP, _SAMPLE_TID, _SAMPLE_TIME = 1 << 0, 1 << 1, 1 << 2
# attr flag bits: disabled (until ``enable``), inherit (threads a sampled thread starts are sampled
# into its ring, and switched on and off with its event), exclude_kernel, exclude_hv, mmap
# (executable mappings), sample_id_all, use_clockid
_FLAGS = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 8) | (1 << 18) | (1 << 25)
_IOC_ENABLE, _IOC_DISABLE, _IOC_SET_OUTPUT = 0x2400, 0x2401, 0x2405
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5
_CLOCK_MONOTONIC = 1
_RECORD_MMAP, _RECORD_LOST, _RECORD_SAMPLE = 1, 2, 9
_PERF_FLAG_FD_CLOEXEC = 1 << 3

# Files outside torch that are libraries of linear algebra, wherever they are installed.
_BLAS = re.compile(r"lib(open)?blas|liblapack|libmkl_|libcblas|libatlas|libflexiblas|libblis|libaccelerate", re.I)


class SamplesUnavailable(RuntimeError):
    """The kernel would not sample this process (perf_event_open refused, or no such system call)."""


def _attr() -> bytes:
    """struct perf_event_attr for the task clock, user space only, with IP, thread and time."""
    head = struct.pack("IIQQQQQ", _PERF_TYPE_SOFTWARE, _ATTR_SIZE, _PERF_COUNT_SW_TASK_CLOCK, PERIOD_NS,
                       _SAMPLE_IP | _SAMPLE_TID | _SAMPLE_TIME, 0, _FLAGS)
    # wakeup_events, bp_type, config1, config2, branch_sample_type, regs_user, stack_user, clockid,
    # regs_intr, aux_watermark, max_stack, reserved
    tail = struct.pack("IIQQQQIiQIHH", 0, 0, 0, 0, 0, 0, 0, _CLOCK_MONOTONIC, 0, 0, 0, 0)
    attr = head + tail
    assert len(attr) == _ATTR_SIZE
    return attr


def _open_event(tid: int, cpu: int = -1) -> int:
    """The sampling event of thread ``tid`` (and the threads it starts) while on ``cpu``."""
    if _SYSCALL is None:
        raise SamplesUnavailable(f"sampling is not supported on {os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(_attr(), _ATTR_SIZE)
    fd = libc.syscall(ctypes.c_long(_SYSCALL), attr, ctypes.c_int(tid), ctypes.c_int(cpu), ctypes.c_int(-1),
                      ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise SamplesUnavailable(f"perf_event_open refused for thread {tid}: {os.strerror(err)} "
                                 f"(kernel.perf_event_paranoid is {_paranoid()})")
    return int(fd)


def _paranoid() -> str:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why the kernel will not let this process sample threads (None: it will), asked once."""
    try:
        os.close(_open_event(0, sorted(os.sched_getaffinity(0))[0]))
    except SamplesUnavailable as exc:
        return str(exc)
    return None


class _Ring:
    """The ring buffer the kernel writes one CPU's records into (those of every event on it)."""

    def __init__(self, fd: int, cpu: int):
        self.fd = fd
        self.page = mmap.PAGESIZE
        pages, refused = RING_PAGES, None
        while pages:
            try:
                self.map = mmap.mmap(fd, (1 + pages) * self.page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                break
            except OSError as exc:
                pages, refused = pages // 2, exc
        else:
            raise SamplesUnavailable(f"the kernel would not map a sample ring for CPU {cpu}: {refused} "
                                     "(raise kernel.perf_event_mlock_kb or the memlock limit)")
        self.size = pages * self.page

    def records(self):
        """The records written since the last read: (type, body bytes); frees their space."""
        head = struct.unpack_from("Q", self.map, 1024)[0]
        tail = struct.unpack_from("Q", self.map, 1032)[0]
        data = self.page
        while tail < head:
            offset = tail % self.size
            header = self._read(data, offset, 8)
            kind, _misc, size = struct.unpack("IHH", header)
            if size < 8:
                break
            yield kind, self._read(data, (offset + 8) % self.size, size - 8)
            tail += size
        struct.pack_into("Q", self.map, 1032, head)

    def _read(self, data: int, offset: int, n: int) -> bytes:
        first = min(n, self.size - offset)
        chunk = self.map[data + offset:data + offset + first]
        return chunk + self.map[data:data + n - first] if first < n else chunk

    def close(self) -> None:
        self.map.close()


@dataclass
class Mapping:
    start: int
    end: int
    path: str  # ANONYMOUS for executable memory no file backs
    offset: int = 0  # of ``start`` in the file


# The name given to executable memory no file backs (the kernel's mmap records name it so too).
ANONYMOUS = "//anon"


@dataclass
class SampleCount:
    """What the samples of the sampled calls show (``ProcessSampler.count``)."""
    samples: int = 0           # inside the sampled calls' windows
    library: int = 0           # of those, in another library's code
    aten: int = 0              # in ATen's compute kernels (or a library's linked into torch)
    unbacked: int = 0          # in executable memory no file backs (a JIT's)
    lost: int = 0              # records the kernel dropped for a full ring
    outside: int = 0           # samples outside every window
    files: dict[str, int] = field(default_factory=dict)  # library file -> samples in windows
    kernels: dict[str, int] = field(default_factory=dict)  # ATen kernel -> samples in windows
    unresolved: int = 0        # samples in torch's code whose function could not be read
    symbols: str | None = None  # why torch's functions could not be read, if they could not
    cpu_ms: float = 0.0        # the process's CPU clock while the record was on (ended threads too)

    @property
    def foreign(self) -> int:
        """Samples in code that is not the solution's and does not run for what it may do:
        another library's, ATen's compute kernels, code no file backs."""
        return self.library + self.aten + self.unbacked

    @property
    def library_share(self) -> float:
        return self.foreign / self.samples if self.samples else 0.0

    @property
    def coverage(self) -> float | None:
        """The share of the process's CPU time while the record was on that its samples account
        for: less than 1 by the time spent in the kernel (not sampled) and by samples the kernel
        dropped for a full ring, more where threads were still running when the clock was read
        (OpenMP's, spinning); None before any CPU time."""
        return self.samples * PERIOD_NS / 1e6 / self.cpu_ms if self.cpu_ms > 0 else None

    def to_dict(self) -> dict:
        top = sorted(self.files.items(), key=lambda kv: -kv[1])[:5]
        kernels = sorted(self.kernels.items(), key=lambda kv: -kv[1])[:5]
        return {"samples": self.samples, "library_samples": self.library, "aten_samples": self.aten,
                "unbacked_samples": self.unbacked, "library_share": round(self.library_share, 4),
                "lost": self.lost, "outside_windows": self.outside, "period_us": PERIOD_NS / 1e3,
                "cpu_ms": round(self.cpu_ms, 3),
                "coverage": round(self.coverage, 3) if self.coverage is not None else None,
                "library_files": {Path(k).name: v for k, v in top}, "aten_kernels": dict(kernels),
                "unresolved_samples": self.unresolved, "symbols": self.symbols}


class ProcessSampler:
    """The task clock of every thread of process ``pid``, sampled into rings the judge holds.

    The events start switched off; ``enable``/``disable`` switch every thread's on and off. Each
    thread there when the sampler starts gets an event of its own on each CPU the process may run
    on; a thread started later (inside a sampled call too) inherits its creator's. The kernel maps
    no ring of an event that threads inherit unless the event is one CPU's, hence one event per
    thread and CPU, all of one CPU's writing into that CPU's ring. ``enable`` reads the mappings
    afresh. ``watch(start_ns, end_ns)`` marks a window of the judge's clock (a sampled call);
    ``read()`` drains the rings; ``count`` is what the windows hold."""

    def __init__(self, pid: int, own_dirs: tuple[str, ...] = ()):
        self.pid = pid
        self.windows: list[tuple[int, int]] = []
        self._count = SampleCount()
        self._pending: list[tuple[int, int]] = []  # (time, ip) not yet placed in a window
        # Samples in torch's code not yet placed in a function: (file, offset) -> samples
        self._in_torch: dict[tuple[str, int], int] = {}
        self._torch = torch_dirs()
        # torch's, this package's, and the directories the judge puts the solution's builds in
        self._allowed = (*self._torch, package_dir(), *(os.path.realpath(d) + os.sep for d in own_dirs))
        self._maps: list[Mapping] = []
        self._starts: list[int] = []
        self._library: dict[str, bool] = {}
        self._cpu_on: float | None = None
        self.threads: dict[int, list[int]] = {}  # thread -> its events (none for one that ended)
        self.rings: dict[int, _Ring] = {}  # CPU -> its ring
        try:
            self.cpus = process_cpus(pid)
            _allow_descriptors(len(self.cpus) * (len(os.listdir(f"/proc/{pid}/task")) + 8))
            self._add_threads()
        except (SamplesUnavailable, OSError) as exc:
            self.close()
            if isinstance(exc, SamplesUnavailable):
                raise
            raise SamplesUnavailable(f"process {pid} is gone or cannot be read: {exc}") from None

    def _add_threads(self) -> None:
        """An event on every thread of the process. Listed until a listing finds none new: a
        thread started before its creator's event was open inherits nothing, but is listed by
        then; one started after inherits the event."""
        while True:
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
            except OSError as exc:
                raise SamplesUnavailable(f"process {self.pid} is gone") from exc
            new = [tid for tid in tids if tid not in self.threads]
            if not new:
                return
            for tid in new:
                self.threads[tid] = events = []
                try:
                    for cpu in self.cpus:
                        events.append(fd := _open_event(tid, cpu))
                        if cpu in self.rings:
                            try:
                                fcntl.ioctl(fd, _IOC_SET_OUTPUT, self.rings[cpu].fd)
                            except OSError as exc:
                                raise SamplesUnavailable(f"the kernel would not send thread {tid}'s samples on CPU "
                                                         f"{cpu} to that CPU's ring: {exc}") from None
                        else:
                            self.rings[cpu] = _Ring(fd, cpu)
                except SamplesUnavailable:
                    if os.path.exists(f"/proc/{self.pid}/task/{tid}"):
                        raise  # refused for a live thread; one that just ended has nothing to sample

    def enable(self) -> None:
        """Sample every thread of the process from now on (threads new since the last call too).
        Its mappings are read afresh: while the events are off the kernel sends no mmap records,
        so a library mapped between two sampled calls is known only from ``/proc/PID/maps``."""
        try:
            self._read_maps()
        except OSError:
            pass  # the process ended
        self._cpu_on = cpu_seconds(self.pid)
        for fd in self._events():
            fcntl.ioctl(fd, _IOC_ENABLE, 0)  # the events its threads inherited too

    def disable(self) -> None:
        for fd in self._events():
            fcntl.ioctl(fd, _IOC_DISABLE, 0)
        after = cpu_seconds(self.pid)
        if self._cpu_on is not None and after is not None:
            self._count.cpu_ms += (after - self._cpu_on) * 1e3

    def _events(self) -> list[int]:
        return [fd for events in self.threads.values() for fd in events]

    def _read_maps(self) -> None:
        """The process's executable mappings now, as the kernel lists them (no overlaps)."""
        maps = []
        with open(f"/proc/{self.pid}/maps") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) >= 5 and "x" in parts[1]:
                    path = _code_name(parts[5].rstrip("\n") if len(parts) == 6 else "")
                    if path is not None:
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        maps.append(Mapping(lo, hi, path, int(parts[2], 16)))
        self._maps = sorted(maps, key=lambda m: m.start)
        self._starts = [m.start for m in self._maps]

    def _map(self, start: int, end: int, path: str, offset: int) -> None:
        # A newer mapping over an older one's addresses wins: drop those it overlaps.
        self._maps = [m for m in self._maps if m.end <= start or m.start >= end]
        bisect.insort(self._maps, Mapping(start, end, path, offset), key=lambda m: m.start)
        self._starts = [m.start for m in self._maps]

    def _mapping_at(self, ip: int) -> Mapping | None:
        i = bisect.bisect_right(self._starts, ip) - 1
        if i >= 0 and self._maps[i].start <= ip < self._maps[i].end:
            return self._maps[i]
        return None

    def is_library(self, path: str) -> bool:
        known = self._library.get(path)
        if known is None:
            known = self._library[path] = is_other_library(path, self._allowed)
        return known

    def watch(self, start_ns: int, end_ns: int) -> None:
        self.windows.append((start_ns, end_ns))

    def read(self) -> None:
        """Drain every ring, and place the samples in the windows marked so far."""
        for ring in self.rings.values():
            for kind, body in ring.records():
                if kind == _RECORD_SAMPLE and len(body) >= 24:
                    ip, _pid, _tid, t = struct.unpack_from("QIIQ", body)
                    self._pending.append((t, ip))
                elif kind == _RECORD_MMAP and len(body) >= 32:
                    pid, _tid, addr, length, pgoff = struct.unpack_from("IIQQQ", body)
                    name = _code_name(body[32:].split(b"\0", 1)[0].decode(errors="replace"))
                    # (a process it forked inherits the events too; its mappings are not the candidate's)
                    if name is not None and pid == self.pid:
                        self._map(addr, addr + length, name, pgoff)
                elif kind == _RECORD_LOST and len(body) >= 16:
                    self._count.lost += struct.unpack_from("QQ", body)[1]
        self._place()

    def _place(self) -> None:
        c, windows = self._count, sorted(self.windows)
        starts = [w[0] for w in windows]
        for t, ip in self._pending:
            i = bisect.bisect_right(starts, t) - 1
            if i < 0 or t > windows[i][1]:
                c.outside += 1
                continue
            c.samples += 1
            mapping = self._mapping_at(ip)
            if mapping is None:
                continue
            if mapping.path == ANONYMOUS:
                c.unbacked += 1
            elif mapping.path.startswith(self._torch):
                key = (mapping.path, ip - mapping.start + mapping.offset)
                self._in_torch[key] = self._in_torch.get(key, 0) + 1
            elif self.is_library(mapping.path):
                c.library += 1
                c.files[mapping.path] = c.files.get(mapping.path, 0) + 1
        self._pending.clear()

    @property
    def count(self) -> SampleCount:
        """What the windows hold so far, torch's samples placed in its functions."""
        if self._in_torch:
            self._place_in_torch()
        return self._count

    def _place_in_torch(self) -> None:
        """Each sample in torch's code counted where its function is ATen's compute (aten_kernels);
        the symbol tables are read here, after the calls, not between them."""
        hits, self._in_torch, c = self._in_torch, {}, self._count
        try:
            kernels, unreadable = aten_kernels.kernels_at(hits)
        except (aten_kernels.SymbolsUnavailable, OSError, subprocess.SubprocessError) as exc:
            kernels, unreadable = {}, {"": str(exc)}
        for key, n in hits.items():
            if key not in kernels:
                c.unresolved += n
            elif (kernel := kernels[key]) is not None:
                c.aten += n
                c.kernels[kernel] = c.kernels.get(kernel, 0) + n
        if unreadable:
            c.symbols = "; ".join(sorted(set(unreadable.values())))

    def close(self) -> None:
        for ring in self.rings.values():
            ring.close()
        for fd in self._events():
            os.close(fd)
        self.rings.clear()
        self.threads.clear()


def process_cpus(pid: int) -> list[int]:
    """The CPUs process ``pid`` may run on, whatever affinity it gives itself: its cgroup's
    cpuset (cgroup v2's effective one, the nearest ancestor's that sets it), else every online
    CPU."""
    listed = SYSFS_CPUS / "online"
    online = cpu_list(listed.read_text()) if listed.exists() else frozenset(range(os.cpu_count() or 1))
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError as exc:
        raise SamplesUnavailable(f"process {pid} is gone") from exc
    unified = next((line.split("::", 1)[1] for line in lines if line.startswith("0::")), None)
    if unified is not None:
        root = Path("/sys/fs/cgroup")
        group = root / unified.lstrip("/")
        for where in (group, *group.parents):
            cpuset = where / "cpuset.cpus.effective"
            if cpuset.is_file() and (cpus := cpu_list(cpuset.read_text())):
                return sorted(cpus & online) or sorted(online)
            if where == root:
                break
    return sorted(online)


def _allow_descriptors(needed: int) -> None:
    """Raise this process's open-file limit towards its hard limit where ``needed`` more might
    not fit (one event per thread and CPU)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(os.listdir("/proc/self/fd")) + needed + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))


def is_other_library(path: str, own: tuple[str, ...], roots: tuple[str, ...] | None = None) -> bool:
    """Whether code in file ``path`` is another library's compute. Never in the ``own``
    directories (torch's, this package's, the judge's builds of the solution); always in another
    Python package's directory, or a BLAS or LAPACK library's; and anywhere else outside the
    places code may honestly run from (``roots``: the Python installation and the system's
    libraries), so that a library copied under another name into the candidate's own directory
    counts as well."""
    real = os.path.realpath(path)
    if any(real.startswith(d) for d in own):
        return False
    if "/site-packages/" in real or "/dist-packages/" in real or _BLAS.search(os.path.basename(real)):
        return True
    return not any(real.startswith(r) for r in (roots if roots is not None else code_roots()))


# The system's library directories: libc, libstdc++, OpenMP and the rest of what torch links.
SYSTEM_LIBRARY_DIRS = ("/lib/", "/lib32/", "/lib64/", "/libx32/", "/usr/lib/", "/usr/lib32/", "/usr/lib64/",
                       "/usr/libx32/", "/usr/local/lib/")


@functools.lru_cache(maxsize=1)
def code_roots() -> tuple[str, ...]:
    """Where code may honestly run from besides the own directories: the Python installation
    (its packages' directories excepted, above) and the system's libraries."""
    prefixes = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                       sys.base_exec_prefix)}
    interpreter = os.path.realpath(sys.executable)
    return (*sorted(prefixes), interpreter, *SYSTEM_LIBRARY_DIRS)


def torch_dirs() -> tuple[str, ...]:
    """The directories of torch's own code and the libraries its wheel bundles: never another
    library's, and placed function by function (``aten_kernels``)."""
    import torch

    root = os.path.realpath(os.path.dirname(torch.__file__))
    return (root + os.sep, root + ".libs" + os.sep)


def package_dir() -> str:
    """This package's directory (the worker's own code)."""
    return os.path.realpath(os.path.dirname(os.path.dirname(__file__))) + os.sep


# Code the kernel maps into every process: not the candidate's, and no file of its.
_KERNEL_CODE = ("[vdso]", "[vsyscall]", "[uprobes]")
# Memory the kernel names as if files backed it: shared anonymous memory, System V shared memory,
# memory files.
_MEMORY_NAMES = ("/dev/zero", "/SYSV", "/memfd:")


def _code_name(name: str) -> str | None:
    """How an executable mapping's name is kept: a file's path as it is, ANONYMOUS for memory no
    file backs (named or not), None for the kernel's own code."""
    if name.startswith("/") and not name.startswith((ANONYMOUS, *_MEMORY_NAMES)):
        return name
    return None if name in _KERNEL_CODE else ANONYMOUS


def now_ns() -> int:
    """The judge's clock, the one the samples carry (CLOCK_MONOTONIC)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)
