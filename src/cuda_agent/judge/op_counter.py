"""The op counter: a small native module that counts the ATen ops of every candidate call.

The judge builds it once per PyTorch and Python (``build``, with torch's extension machinery, into
its cache); each candidate worker loads a private copy and installs it before the candidate is
imported (``load``). See ``native/op_counter.cpp`` for why it is native and always on.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from filelock import FileLock

NAME = "cuda_agent_op_counter"
SOURCE = Path(__file__).resolve().parent / "native" / "op_counter.cpp"


class OpCounterUnavailable(RuntimeError):
    """The counter could not be built here (no compiler, a PyTorch without headers)."""


def build(cache_dir: Path) -> Path:
    """The built module, compiled on first use; raises OpCounterUnavailable."""
    import torch

    key = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()
                         + sys.version.encode()).hexdigest()[:16]
    build_dir = Path(cache_dir) / "op_counter" / key
    built = sorted(build_dir.glob(f"{NAME}*.so"))
    if built:
        return built[0]
    build_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(build_dir) + ".lock"):
        built = sorted(build_dir.glob(f"{NAME}*.so"))
        if not built:
            from torch.utils.cpp_extension import load as load_extension

            try:
                load_extension(NAME, [str(SOURCE)], build_directory=str(build_dir), extra_cflags=["-O2"],
                               verbose=False)
            except Exception as exc:  # noqa: BLE001 - the build's own message says what is missing
                raise OpCounterUnavailable(str(exc).strip().splitlines()[-1] if str(exc).strip() else
                                           type(exc).__name__) from None
            built = sorted(build_dir.glob(f"{NAME}*.so"))
    if not built:
        raise OpCounterUnavailable(f"the build left no module in {build_dir}")
    return built[0]


def load(path: str) -> Any:
    """Load the counter in a worker (after torch) and install its callback."""
    spec = importlib.util.spec_from_file_location(NAME, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()
    return module
