"""The machine's memory as a judge's workers meet it: how much there is (RAM, or the cgroup's
limit where that is lower), how much is free now, the cap one worker gets by default, and whether
the kernel's out-of-memory killer has ended a process (its counters, read before and after)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3
AUTO = "auto"  # JudgeConfig.memory_limit_bytes: sized from the machine

# The default cap shares the machine among the workers that hold a task's model, inputs and
# outputs at once: each judge's reference and candidate. (The process that stages the timed
# inputs holds only the inputs, in a buffer it shares with the candidate.)
WORKERS_PER_JUDGE = 2
# Never below this, however small the share: a check of a KernelBench level-1 problem holds up to
# 1.4 GB in one worker (docs/kernelbench.md), and a lower cap would fail honest work that the
# machine, with fewer judges, can run. Where the share is smaller, the machine's own
# out-of-memory killer is the limit, and the verdict says so.
CAP_FLOOR = 2 * GIB
# Never above this: no task the judge is made for comes near it on the host, and a runaway
# process stopped here holds less of a large machine that other judges share.
CAP_CEILING = 32 * GIB
# With less than this free per worker, a run is refused rather than started to be killed. A
# worker of a tiny task (a 256x256 elementwise op on the cpu backend) holds about 680 MB of its
# own by the end of its checks, so a run refused here is one whose workers could not finish.
WORKER_MINIMUM = 256 * 1024**2

PROC_MEMINFO = Path("/proc/meminfo")
PROC_VMSTAT = Path("/proc/vmstat")
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTS = Path("/proc/self/mounts")
NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class Cgroup:
    """This process's memory cgroup: its directory, the hierarchy's mount point above it, and
    the cgroup version (2: the unified hierarchy; 1: the memory controller's own)."""

    path: Path
    root: Path
    version: int

    def levels(self) -> list[Path]:
        """The group and each ancestor up to the mount point: a limit set on any of them holds."""
        found = [self.path]
        for parent in self.path.parents:
            if parent != self.root and self.root not in parent.parents:
                break
            found.append(parent)
        return found


@dataclass(frozen=True)
class MachineMemory:
    total_bytes: int      # what the judge's processes may hold: RAM, or the cgroup's limit if lower
    available_bytes: int  # what they may still take now, page cache counted as free
    limited_by: str       # "RAM" or "cgroup"

    def describe(self) -> str:
        return (f"the machine's {gib(self.total_bytes)}" if self.limited_by == "RAM"
                else f"the {gib(self.total_bytes)} its cgroup allows")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _fields(text: str | None) -> dict[str, int]:
    """``name value`` lines (memory.stat, memory.events, /proc/vmstat; meminfo's ``name: N kB``)."""
    found = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            found[parts[0]] = int(parts[1]) * (1024 if parts[2:3] == ["kB"] else 1)
    return found


def memory_cgroup(proc_cgroup: Path | None = None, mounts: Path | None = None) -> Cgroup | None:
    """This process's memory cgroup: the unified (v2) group where the memory controller is
    there, else the v1 memory hierarchy's group; None where neither is mounted. Where the group's
    path is not under the mount (a container that mounts only its own group), the mount is it."""
    lines = (_read(proc_cgroup or PROC_CGROUP) or "").splitlines()
    points: dict[int, Path] = {}
    for line in (_read(mounts or PROC_MOUNTS) or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "cgroup2":
            points.setdefault(2, Path(parts[1]))
        elif len(parts) >= 4 and parts[2] == "cgroup" and "memory" in parts[3].split(","):
            points.setdefault(1, Path(parts[1]))
    for version, marker in ((2, "memory.max"), (1, "memory.limit_in_bytes")):
        if version not in points:
            continue
        for line in lines:
            number, controllers, relative = (line.split(":", 2) + ["", ""])[:3]
            if (version == 2 and number == "0" and controllers == "") or \
                    (version == 1 and "memory" in controllers.split(",")):
                root = points[version]
                group = root / relative.strip().lstrip("/")
                if not group.is_dir():
                    group = root
                if (group / marker).exists() or (version == 2 and (group / "memory.events").exists()):
                    return Cgroup(group, root, version)
    return None


def _headroom(cgroup: Cgroup) -> tuple[int | None, int | None]:
    """The lowest memory limit on the group and its ancestors, and the least room left under
    any of them (usage less page cache, which the kernel reclaims before it kills)."""
    limit_file, usage_file = (("memory.max", "memory.current") if cgroup.version == 2
                              else ("memory.limit_in_bytes", "memory.usage_in_bytes"))
    cache_field = "file" if cgroup.version == 2 else "total_cache"
    limit = room = None
    for level in cgroup.levels():
        text = (_read(level / limit_file) or "").strip()
        if not text.isdigit() or int(text) >= NO_LIMIT:
            continue
        limit = min(limit or NO_LIMIT, int(text))
        usage = (_read(level / usage_file) or "").strip()
        if usage.isdigit():
            cache = _fields(_read(level / "memory.stat")).get(cache_field, 0)
            room = min(room if room is not None else NO_LIMIT, max(0, int(text) - int(usage) + cache))
    return limit, room


def machine_memory(meminfo: Path | None = None, cgroup: Cgroup | None | str = AUTO) -> MachineMemory | None:
    """The memory the judge's processes share, or None where /proc/meminfo does not say.
    ``cgroup``: the memory cgroup to honour (AUTO: this process's; None: none)."""
    info = _fields(_read(meminfo or PROC_MEMINFO))
    if "MemTotal" not in info:
        return None
    total = info["MemTotal"]
    available = info.get("MemAvailable", info.get("MemFree", 0))
    group = memory_cgroup() if cgroup == AUTO else cgroup
    limit, room = _headroom(group) if isinstance(group, Cgroup) else (None, None)
    if room is not None:
        available = min(available, room)
    if limit is not None and limit < total:
        return MachineMemory(limit, min(available, limit), "cgroup")
    return MachineMemory(total, available, "RAM")


def default_cap(memory: MachineMemory, judges_at_once: int = 1) -> int:
    """One worker's share of the machine: its memory over the workers of ``judges_at_once``
    judges, within the floor and the ceiling, and never more than the machine has."""
    share = memory.total_bytes // (WORKERS_PER_JUDGE * max(1, judges_at_once))
    return min(max(share, CAP_FLOOR), CAP_CEILING, memory.total_bytes)


def resolve_cap(setting: int | str | None, judges_at_once: int = 1,
                memory: MachineMemory | None | str = AUTO) -> tuple[int | None, str]:
    """The cap ``JudgeConfig.memory_limit_bytes`` asks for, in bytes (None: no cap), and how it
    was decided. ``memory``: the machine's (AUTO: read it now)."""
    if setting is None:
        return None, "no cap: switched off (JudgeConfig(memory_limit_bytes=None))"
    if setting != AUTO:
        if isinstance(setting, bool) or not isinstance(setting, int) or setting <= 0:
            raise ValueError(f"memory_limit_bytes must be a positive number of bytes, {AUTO!r} or None, "
                             f"not {setting!r}")
        return setting, "set (JudgeConfig.memory_limit_bytes)"
    machine = machine_memory() if memory == AUTO else memory
    if not isinstance(machine, MachineMemory):  # nothing to size it from: the ceiling still stops a runaway
        return CAP_CEILING, "the ceiling: the machine's memory could not be read"
    cap = default_cap(machine, judges_at_once)
    shared = WORKERS_PER_JUDGE * max(1, judges_at_once)
    return cap, (f"sized from {machine.describe()}, shared by {shared} workers ({judges_at_once} judge(s) "
                 f"at once), within {gib(CAP_FLOOR)} to {gib(CAP_CEILING)}")


@dataclass(frozen=True)
class OomCounter:
    """How many processes the kernel's out-of-memory killer has ended: in this process's cgroup
    and those below it (``scope`` "cgroup"), or on the whole machine ("machine")."""

    scope: str
    count: int


def oom_kills(cgroup: Cgroup | None | str = AUTO, vmstat: Path | None = None) -> OomCounter | None:
    """The kernel's count of out-of-memory kills, the cgroup's where it keeps one (it counts the
    processes of the group and of those below it, whatever limit ran out), else the machine's;
    None where neither is readable."""
    group = memory_cgroup() if cgroup == AUTO else cgroup
    if isinstance(group, Cgroup):
        name = "memory.events" if group.version == 2 else "memory.oom_control"
        count = _fields(_read(group.path / name)).get("oom_kill")
        if count is not None:
            return OomCounter("cgroup", count)
    count = _fields(_read(vmstat or PROC_VMSTAT)).get("oom_kill")
    return OomCounter("machine", count) if count is not None else None


def killed_for_memory(before: OomCounter | None, after: OomCounter | None) -> bool:
    """Whether the kernel's out-of-memory killer ended a process between the two readings."""
    return before is not None and after is not None and before.scope == after.scope and after.count > before.count
