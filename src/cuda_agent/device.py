"""Which execution backend to use, and the facts of the device it runs on."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import BackendUnavailableError

BACKENDS = ("cuda", "cpu")


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver install raises from inside torch
        return False


def machine_gpu(index: int) -> str:
    """GPU ``index`` as the machine numbers it: CUDA_VISIBLE_DEVICES maps a process's indices to
    the machine's, so a process given one GPU of several (a Ray actor) sees it as 0."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if index < len(visible) else str(index)


def resolve_backend(requested: str | None) -> str:
    """'cuda' or 'cpu'. None or 'auto' picks cuda when a GPU is visible."""
    if requested in (None, "", "auto"):
        return "cuda" if cuda_available() else "cpu"
    if requested not in BACKENDS:
        raise BackendUnavailableError(f"unknown backend {requested!r}; choose one of {', '.join(BACKENDS)}")
    if requested == "cuda" and not cuda_available():
        import torch

        why = ("this torch build has no CUDA support" if torch.version.cuda is None
               else "no NVIDIA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)")
        raise BackendUnavailableError(
            f"the cuda backend needs an NVIDIA GPU, but {why} (torch {torch.__version__}). "
            "Run on a GPU machine, or use --device cpu to judge CPU solutions (kernels/*.cpp)."
        )
    return requested


@dataclass(frozen=True)
class DeviceInfo:
    backend: str
    name: str
    torch_version: str
    compute_capability: str | None = None
    multiprocessors: int | None = None
    memory_bytes: int | None = None
    l2_cache_bytes: int | None = None
    shared_memory_per_block_bytes: int | None = None
    shared_memory_per_multiprocessor_bytes: int | None = None
    registers_per_multiprocessor: int | None = None
    max_threads_per_multiprocessor: int | None = None
    warp_size: int | None = None
    cuda_version: str | None = None
    cpu_cores: int | None = None
    last_level_cache_bytes: int | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def cache_bytes(self) -> int:
        """The cache a timing flush must overwrite: L2 on a GPU, the last level on a CPU."""
        return self.l2_cache_bytes or self.last_level_cache_bytes or 32 * 1024 * 1024


def _cpu_last_level_cache() -> int | None:
    caches = cpu_caches(0)
    return max((size for size, _ in caches), default=None)


def cpu_list(text: str) -> frozenset[int]:
    """CPUs of a kernel CPU list such as ``0-3,8`` (sysfs, cgroup cpusets)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


SYSFS_CPUS = Path("/sys/devices/system/cpu")


def cpu_caches(cpu: int, sysfs: Path = SYSFS_CPUS) -> list[tuple[int, frozenset[int]]]:
    """The data caches CPU ``cpu`` uses, innermost first, as (bytes, the CPUs sharing it), from
    sysfs; empty where the kernel does not say."""
    found = []
    for index in (sysfs / f"cpu{cpu}" / "cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
            shared = cpu_list((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        found.append((level, int(text.rstrip("KMG")) * scale, shared))
    return [(size, shared) for _, size, shared in sorted(found, key=lambda cache: cache[0])]


@dataclass(frozen=True)
class SharedCacheFlush:
    """How a CPU timing flush can be split: each process flushes the caches below the last level
    itself (``private_bytes``: its core's, or its cluster's), and any process on ``cpus`` can
    flush the last-level cache they all share."""

    private_bytes: int
    cpus: frozenset[int]


def shared_cache_flush(cpus: set[int] | list[int], sysfs: Path = SYSFS_CPUS) -> SharedCacheFlush | None:
    """Whether every CPU of ``cpus`` shares one last-level cache, above caches private to each
    core; None where they do not (several L3 slices, one per chiplet) or sysfs does not say."""
    private_bytes, shared_by = None, None
    for cpu in cpus:
        caches = cpu_caches(cpu, sysfs)
        if len(caches) < 2:
            return None
        *inner, (_, last) = caches
        if not set(cpus) <= last:
            return None
        own = [size for size, sharing in inner if len(sharing) < len(last) and cpu in sharing]
        if not own:
            return None
        private_bytes = max(private_bytes or 0, max(own))
        shared_by = last
    if private_bytes is None or shared_by is None:
        return None
    return SharedCacheFlush(private_bytes, shared_by)


@functools.lru_cache(maxsize=None)
def cpu_name() -> str:
    """The CPU model, as /proc/cpuinfo names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def probe_device(backend: str, index: int = 0) -> DeviceInfo:
    """Read the device's facts. For cuda this initialises CUDA in the calling process."""
    import torch

    if backend == "cpu":
        return DeviceInfo("cpu", cpu_name(), torch.__version__,
                          cpu_cores=len(os.sched_getaffinity(0)),
                          last_level_cache_bytes=_cpu_last_level_cache())
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        "cuda", props.name, torch.__version__,
        compute_capability=f"{props.major}.{props.minor}",
        multiprocessors=props.multi_processor_count,
        memory_bytes=props.total_memory,
        l2_cache_bytes=getattr(props, "L2_cache_size", None),
        shared_memory_per_block_bytes=getattr(props, "shared_memory_per_block_optin", None),
        shared_memory_per_multiprocessor_bytes=getattr(props, "shared_memory_per_multiprocessor", None),
        registers_per_multiprocessor=getattr(props, "regs_per_multiprocessor", None),
        max_threads_per_multiprocessor=getattr(props, "max_threads_per_multi_processor", None),
        warp_size=getattr(props, "warp_size", 32),
        cuda_version=torch.version.cuda,
    )
