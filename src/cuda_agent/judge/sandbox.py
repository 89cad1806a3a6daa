"""Limits and isolation applied to every worker process before it runs any Python.

Applied in the child between fork and exec: a new session (so the whole process group can be
killed), resource limits, no core dumps, and a new network namespace where the OS allows it.
The environment is rebuilt from scratch rather than inherited. What was actually applied is
recorded, because isolation that silently failed is worse than none.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

# Variables a worker may inherit. Everything else (API keys, seeds, paths to the judge's own
# files) is dropped. NCCL/NVSHMEM settings are kept because the host may require them.
_PASSTHROUGH = ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES")
_PASSTHROUGH_PREFIXES = ("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_")


@dataclass(frozen=True)
class SandboxPolicy:
    isolate_network: bool = True
    max_open_files: int = 4096
    max_file_bytes: int = 16 * 1024**3


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

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (policy.max_open_files, policy.max_open_files))
        resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
        if policy.isolate_network:
            # Fails without CAP_SYS_ADMIN; the worker then reports that it still sees the network.
            _LIBC.unshare(CLONE_NEWNET)

    return preexec


def network_isolated() -> bool:
    """True when this process sees no network interface but loopback (run inside the worker)."""
    # /proc/self/net follows the reader's namespace (sysfs would show the mounter's).
    try:
        lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return {line.split(":", 1)[0].strip() for line in lines} <= {"lo"}
