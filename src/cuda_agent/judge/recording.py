"""Evidence recorded inside a candidate's process while its ``forward`` runs.

Runs in the worker, next to untrusted code, so every record here is a tripwire rather than a
proof: it names what a solution did (an ATen compute op, a kernel that is not its own, a thread
left running, a flipped numerics flag) so that the judge can reject it and say why. The process
boundary, secret inputs and the judge's own clock are what hold against a solution that also
defeats these records; ``evidence.py`` in the judge decides what the records mean.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any, Callable

FORWARD_SCOPE = "cuda_agent::candidate_forward"

# The profiler's first use costs about a second (loading and starting CUPTI). A worker starts it
# on this thread while it does other things, and the kernel record waits for it.
_warmup: threading.Thread | None = None


def gpu_profiler() -> Any:
    """torch's profiler of CPU ops and CUDA kernels, as ``torch.profiler.profile`` with both
    activities makes it, without that wrapper's start: it asks ``hasattr(torch, "_inductor")``,
    which imports torch.compile's compiler and front end (torch._inductor, torch._dynamo, sympy:
    5 s of CPU in every candidate that records kernels)."""
    from torch.autograd import profiler

    return profiler.profile(use_cpu=True, use_device="cuda", use_kineto=True)


def warm_profiler() -> None:
    """Start the GPU profiler once in the background, so that the kernel record is quick."""
    global _warmup

    def run() -> None:
        with gpu_profiler():
            pass

    _warmup = threading.Thread(target=run, name="cuda-agent-profiler-warmup", daemon=True)
    _warmup.start()


def profiler_ready() -> None:
    """Wait for the background start of the profiler, if one is under way. CUPTI starts threads
    of its own while it starts: a call counted while that goes on would seem to leave threads
    running (honest solutions were refused so under load)."""
    if _warmup is not None:
        _warmup.join()


_cudart: Any = None


def cudart() -> Any:
    """The CUDA runtime library this process already loaded (through torch), or None.

    Found once: the flags are read after every check, and the mapping does not change."""
    global _cudart
    if _cudart is None:
        _cudart = _find_cudart()
    return _cudart


def _find_cudart() -> Any:
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libcudart" in line})
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


def persisting_l2_limit() -> int | None:
    """Bytes of L2 set aside for persisting accesses (a model could pin its data there)."""
    import ctypes

    library = cudart()
    if library is None:
        return None
    value = ctypes.c_size_t(0)
    if library.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(CUDA_LIMIT_PERSISTING_L2)) != 0:
        return None
    return int(value.value)


def numerics_flags() -> dict[str, Any]:
    """Global torch settings that change the numerics or speed of library calls."""
    import torch

    flags: dict[str, Any] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
    }
    matmul = torch.backends.cuda.matmul
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        flags[f"cuda.matmul.{name}"] = getattr(matmul, name, None)
    if torch.cuda.is_initialized():
        flags["cuda.persisting_l2_limit"] = persisting_l2_limit()
    return flags


def thread_count() -> int:
    """Threads of this process as the OS sees them (Python's, C++'s and the driver's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _op_recorder():
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpRecorder(TorchDispatchMode):
        """Counts every ATen op dispatched while active, from Python or from C++."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # Else torch wraps __torch_dispatch__ so that torch.compile skips it, and the wrapper
            # imports torch.compile's front end (torch._dynamo, sympy: 5 s of CPU) at the first op
            # of every candidate. Nothing a recorded call runs is compiled.
            return False

        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = func._schema.name
            if name in _CASTS and _is_downcast(name, args, result):
                name += "[to lower precision]"  # not a plain copy: it computes in less precision
            self.ops[name] += 1
            return result

    return OpRecorder()


_CASTS = ("aten::_to_copy", "aten::to", "aten::copy_", "aten::_copy_from")


def _is_downcast(name: str, args: tuple, result: Any) -> bool:
    """Whether a copy turns floating-point values into a narrower floating-point type."""
    import torch

    if not args or not isinstance(args[0], torch.Tensor):
        return False
    if name == "aten::copy_":
        source, target = (args[1] if len(args) > 1 else None), args[0]
    else:
        source, target = args[0], result
    if not isinstance(source, torch.Tensor) or not isinstance(target, torch.Tensor):
        return False
    return (source.is_floating_point() and target.is_floating_point()
            and target.element_size() < source.element_size())


def record_ops(call: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """Run ``call`` and return its result with the ATen ops it dispatched."""
    recorder = _op_recorder()
    with recorder:
        result = call()
    return result, dict(recorder.ops)


def record_kernels(call: Callable[[], Any]) -> tuple[Any, list[dict[str, Any]] | None]:
    """Run ``call`` under the CUDA profiler; return its result and the kernels it launched.

    Each kernel comes with its device time and the ATen op it was launched from, or "" for a
    launch made directly by the solution's code (its own kernels, or a library it called). The
    kernels are ``None`` when the profiler itself failed (an error outside ``call``, which the
    judge answers by recording again); an error of ``call`` is raised as it is.
    """
    import torch
    from torch.autograd import DeviceType
    from torch.autograd.profiler import record_function

    profiler_ready()  # one profiler at a time
    ran: dict[str, Any] = {}

    def traced() -> None:
        try:
            with record_function(FORWARD_SCOPE):
                ran["result"] = call()
            torch.cuda.synchronize()
        except BaseException as exc:  # the candidate's: raised below, after the profiler stops
            ran["error"] = exc

    # Work queued before (the inputs, the weights) finishes first: on a busy GPU it would run, and be
    # recorded, inside the session, as kernels that no op of forward launched.
    torch.cuda.synchronize()
    try:
        with gpu_profiler() as prof:
            traced()
        events = prof.function_events
    except Exception:  # noqa: BLE001 - the profiler's own failure, not the candidate's
        events = None
    if not ran:  # the profiler failed before forward ran
        traced()
    if "error" in ran:
        raise ran["error"]
    if events is None:
        return ran["result"], None
    # Kernels that the profiler attached to an ATen op were launched by that op.
    from_ops: Counter[tuple[str, float]] = Counter()
    op_of: dict[tuple[str, float], str] = {}
    for event in events:
        if event.device_type == DeviceType.CPU and event.name.startswith("aten::"):
            for kernel in event.kernels:
                key = (kernel.name, round(float(kernel.duration), 3))
                from_ops[key] += 1
                op_of[key] = event.name
    kernels = []
    for event in events:
        if event.device_type != DeviceType.CUDA or event.name == FORWARD_SCOPE:
            continue
        duration = float(event.time_range.end - event.time_range.start)
        key = (event.name, round(duration, 3))
        op = ""
        if from_ops[key] > 0:
            from_ops[key] -= 1
            op = op_of[key]
        kernels.append({"name": event.name, "device_ms": duration / 1e3, "op": op})
    return ran["result"], kernels
