"""Run one candidate task and measure what the filters need, in a worker process.

The worker imports the task from a file (so torch.compile can read its source), builds the model
from a fixed seed, and goes through the execution filters in order, stopping at the first that
fails: KernelBench similarity, eager run, finite outputs, a rerun from another RNG state, constant
output, a second input, the workload window, and torch.compile. Each step's numbers are kept in
its FilterResult.

Eager time is measured with CUDA events on a GPU, one worker timing at a time per device (a file
lock); other workers' checks and compiles still run beside it, which the coarse window tolerates. Without a GPU the window is
judged on the roofline estimate of the time on the target GPU (``estimate``), computed on the
meta device; the CPU time is recorded beside it but says nothing about a GPU.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import filters
from .estimate import PROFILES, estimate_forward
from .filters import FilterSettings
from .records import Candidate, FilterResult

INIT_SEED, INPUT_SEED, RERUN_SEED, OTHER_INPUT_SEED = 1234, 1, 999, 2


@dataclass(frozen=True)
class ProbeSettings:
    device: str = "cpu"                      # "cuda" or "cpu"
    filters: FilterSettings = field(default_factory=FilterSettings)
    kernelbench: str | None = None           # a KernelBench checkout to decontaminate against
    lock_dir: str | None = None              # where the per-device timing lock lives
    profile: str = "h100"                    # the estimate's target GPU when there is none
    warmup: int = 1
    max_reps: int = 10                       # the window is coarse (1 to 100 ms): a few calls do
    timing_budget_s: float = 0.5             # stop repeating a timed call after this long
    threads: int = 1                         # CPU threads per worker
    memory_fraction: float | None = None     # each worker's hard share of GPU memory

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["filters"] = self.filters.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProbeSettings":
        data = dict(data)
        f = dict(data.pop("filters"))
        f["window_ms"] = tuple(f["window_ms"])
        return cls(filters=FilterSettings(**f), **data)


_STATE: dict[str, Any] = {}


def init_worker(settings: dict[str, Any]) -> None:
    """Once per worker process: threads, and the KernelBench index (parsed once, reused)."""
    probe = ProbeSettings.from_dict(settings)
    _STATE.clear()  # a worker serves one run: nothing from an earlier one may carry over
    torch.set_num_threads(max(1, probe.threads))
    if probe.device == "cuda" and probe.memory_fraction:
        # Workers share one GPU: a hard share per worker makes "out of memory" a property of the
        # task (it needs more than its share), not of what the other workers happen to hold.
        torch.cuda.set_per_process_memory_fraction(probe.memory_fraction)
    warnings.simplefilter("ignore")
    _STATE["tmp"] = _scratch_dir()
    _STATE["memory_fraction"] = probe.memory_fraction
    if probe.kernelbench:
        from .similarity import KernelBenchIndex

        # Docstrings are dropped on both sides, so a copy stripped of them is still caught.
        _STATE["kernelbench"] = KernelBenchIndex.from_checkout(probe.kernelbench, strip_docstrings=True)


def _scratch_dir() -> str:
    """This worker's directory for the candidates' source files (imported from there, so that
    tracebacks and torch.compile can read them). Workers end without a word (a pool replaces them
    after so many tasks, Ray kills its actors), so each starting worker removes the directories
    of workers no longer alive instead: one per live worker remains, not one per worker ever."""
    # Per user and host: processes of another host (a container with /tmp shared) are not in /proc.
    root = Path(tempfile.gettempdir()) / f"cuda-agent-synth-tasks-{os.getuid()}-{socket.gethostname()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        if root.stat().st_uid != os.getuid():
            raise PermissionError(f"{root} belongs to another user")
    except OSError:
        return tempfile.mkdtemp(prefix="synth-task-")
    for old in root.iterdir():
        if old.name.isdigit() and int(old.name) != os.getpid() and not Path(f"/proc/{old.name}").exists():
            shutil.rmtree(old, ignore_errors=True)
    mine = root / str(os.getpid())
    mine.mkdir(exist_ok=True)
    return str(mine)


def _load(code: str, index: int):
    if not _STATE.get("tmp"):
        _STATE["tmp"] = _scratch_dir()
    tmp = Path(_STATE["tmp"])
    path = tmp / f"synth_task_{index}.py"
    path.write_text(code)
    name = f"synth_task_{index}_{time.monotonic_ns()}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and torch.compile look modules up by name
    spec.loader.exec_module(module)
    return module


def _outputs(value: Any) -> list[torch.Tensor]:
    """forward's result as a list of tensors; anything else is an error the eager filter reports."""
    if isinstance(value, torch.Tensor):
        return [value.detach()]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [v.detach() for v in value]
    raise TypeError(f"forward returned {type(value).__name__}; a task returns a tensor or a tuple of tensors")


def _inputs(module, seed: int, device: str) -> list:
    # Made on the device itself: drawing a gigabyte of randn on one CPU thread takes seconds,
    # and was most of a candidate's check time on a GPU machine.
    torch.manual_seed(seed)
    with torch.device(device):
        values = module.get_inputs()
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn, inputs: list, settings: ProbeSettings) -> float:
    """Median milliseconds of ``fn(*inputs)`` after warm-up, within the timing budget."""
    device = settings.device
    for _ in range(settings.warmup):
        fn(*inputs)
    _sync(device)
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < settings.max_reps and (len(times) < 3 or time.perf_counter() - started < settings.timing_budget_s):
        if device == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn(*inputs)
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _timing_lock(settings: ProbeSettings):
    if settings.device != "cuda" or not settings.lock_dir:
        return nullcontext()
    from filelock import FileLock

    from ..device import machine_gpu

    os.makedirs(settings.lock_dir, exist_ok=True)
    name = machine_gpu(torch.cuda.current_device())  # a worker given one GPU of several sees it as 0
    return FileLock(os.path.join(settings.lock_dir, f"synth-timing-gpu{name}.lock"))


def estimate_task(module, profile: str = "h100") -> dict[str, Any] | None:
    """The roofline estimate of the task's eager time on the target GPU, or None if the task
    cannot be built on the meta device (it makes tensors with explicit devices or data)."""
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(INIT_SEED)
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            return estimate_forward(model, inputs, PROFILES[profile]).to_dict()
    except Exception:  # meta tensors are unsupported by something in the task
        return None


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def check_candidate(candidate: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Every execution filter, in order, until one fails. Returns JSON-able measurements.

    Whatever the task does, its tensors and compiled graphs are released before the next one.
    """
    try:
        return _check(candidate, settings)
    finally:
        torch._dynamo.reset()
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def _stage_error(name: str, what: str, exc: BaseException) -> FilterResult:
    detail = _error(exc)
    if torch.cuda.is_available() and (isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in detail):
        share = torch.cuda.get_device_properties(0).total_memory * (_STATE.get("memory_fraction") or 1) / 2**30
        detail += f" (each worker may use {share:.1f} GiB of GPU memory)"
    return filters.result(name, False, {"error": detail}, f"{what} failed: {detail}")


def _check(candidate: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    probe = ProbeSettings.from_dict(settings)
    cand = Candidate.from_dict(candidate)
    started = time.perf_counter()
    report: dict[str, Any] = {"filters": [], "eager_ms": None, "compile_ms": None, "estimate": None,
                              "max_similarity": None, "most_similar": None}
    found: list[FilterResult] = []

    def done() -> dict[str, Any]:
        report["filters"] = [f.to_dict() for f in found]
        report["seconds"] = round(time.perf_counter() - started, 3)
        return report

    def keep(result: FilterResult) -> bool:
        found.append(result)
        return result.passed

    index = _STATE.get("kernelbench")
    score = closest = None
    if index is not None:
        score, closest = index.most_similar(cand.code)
        report["max_similarity"], report["most_similar"] = round(score, 4), closest
    if not keep(filters.kernelbench_similarity(score, closest, probe.filters)):
        return done()

    device = probe.device
    try:
        module = _load(cand.code, cand.index)
        torch.manual_seed(INIT_SEED)
        with torch.device(device):  # weights initialised where they live, for the same reason
            model = module.Model(*module.get_init_inputs()).to(device)
        inputs = _inputs(module, INPUT_SEED, device)
        with torch.no_grad():
            first = _outputs(model(*inputs))
        _sync(device)
    except Exception as exc:  # the task's own failure: reported, never raised
        keep(_stage_error("eager_runs", "eager run", exc))
        return done()
    keep(filters.result("eager_runs", True, {"output_shapes": [list(t.shape) for t in first]}))
    report["output_shapes"] = [list(t.shape) for t in first]
    report["estimate"] = estimate_task(module, probe.profile)

    stage = "finite"
    try:
        with torch.no_grad():
            if not keep(filters.finite(first)):
                return done()
            stage = "deterministic_runs"
            torch.manual_seed(RERUN_SEED)
            rerun = _outputs(model(*inputs))
            if not keep(filters.deterministic_runs(first, rerun, probe.filters)):
                return done()
            del rerun
            stage = "not_constant"
            if not keep(filters.not_constant(first, probe.filters)):
                return done()
            stage = "input_dependent"
            # Only the first output stays: the inputs are dropped for the second run and drawn
            # again from their seed after it, so two input sets never share the device's memory.
            del inputs
            if device == "cuda":
                torch.cuda.empty_cache()
            other = _outputs(model(*_inputs(module, OTHER_INPUT_SEED, device)))
            if not keep(filters.input_dependent(first, other, probe.filters)):
                return done()
            del other
            inputs = _inputs(module, INPUT_SEED, device)
            stage = "workload_window"
            with _timing_lock(probe):
                eager_ms = time_call(model, inputs, probe)
            report["eager_ms"] = round(eager_ms, 4)
            if device == "cuda":
                window = filters.workload_window(eager_ms, "measured", probe.filters)
            elif report["estimate"] is None:
                window = filters.result("workload_window", False, {"cpu_ms": eager_ms},
                                        "no GPU, and the task cannot be built on the meta device to estimate its GPU time")
            else:
                window = filters.workload_window(report["estimate"]["ms"], "estimate", probe.filters)
                window.measurement["cpu_ms"] = round(eager_ms, 4)
            if not keep(window):
                return done()

            stage = "compile_matches"
            try:
                torch._dynamo.reset()
                compile_started = time.perf_counter()
                compiled_model = torch.compile(model)
                compiled = _outputs(compiled_model(*inputs))
                _sync(device)
                compile_s = time.perf_counter() - compile_started
            except Exception as exc:
                keep(_stage_error("compile_matches", "torch.compile", exc))
                return done()
            matched = filters.compile_matches(first, compiled, probe.filters)
            matched.measurement["compile_s"] = round(compile_s, 2)
            if keep(matched):
                with _timing_lock(probe):
                    report["compile_ms"] = round(time_call(compiled_model, inputs, probe), 4)
    except Exception as exc:  # a later stage ran out of memory or broke: that stage fails
        if found and found[-1].name == stage:
            found.pop()  # e.g. compiled outputs matched, then timing them ran out of memory
        keep(_stage_error(stage, stage.replace("_", " "), exc))
        return done()
    return done()
