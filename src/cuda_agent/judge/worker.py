"""The worker: a short-lived process that runs one model (reference or candidate) for the judge.

It receives commands on one file descriptor and answers on another (see ``protocol``). It never
sees the other side's outputs: a reference worker computes expected outputs, a candidate worker
computes the candidate's, and the judge compares them in its own process. A worker is started
fresh for every judging run and killed afterwards; a crash or hang here costs only this process.

Commands: ``setup``, ``init_model`` (reference: draw weights, return the state dict),
``load_weights`` (candidate), ``run`` (one forward on seeded inputs), ``time`` (the timing
loop), ``outputs`` (outputs kept from timed calls), ``exit``.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ERROR_COMPILE = "compile_error"
ERROR_RUNTIME = "runtime_error"
ERROR_SETUP = "setup_error"

# The timing clock, bound before any candidate code is imported: replacing time.perf_counter_ns
# later does not change it. (The judge's own clock around each call is the real check.)
_clock_ns = time.perf_counter_ns

# Outputs of timed calls stay on the device up to this many bytes, then move to host memory;
# timing stops early (after at least one call) once the host share would pass its own limit.
KEEP_ON_DEVICE_BYTES = 2 * 1024**3
KEEP_ON_HOST_BYTES = 4 * 1024**3


class WorkerFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _short_traceback(exc: BaseException, hide: tuple[str, ...]) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    for prefix in hide:
        text = text.replace(prefix, "")
    return text[-3000:]


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_tensor_bytes(v) for v in value.values())
    return 0


def _snapshot(value: Any, to_host: bool) -> Any:
    """A copy of an output as it is now, on the device or on the host.

    Timed outputs are kept for checking as copies, so the model's own output memory is freed and
    reused by the allocator exactly as in a user's loop; keeping the originals would force a
    fresh device allocation inside every timed call.
    """
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True) if to_host else value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_snapshot(v, to_host) for v in value)
    if isinstance(value, list):
        return [_snapshot(v, to_host) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v, to_host) for k, v in value.items()}
    return value


class Worker:
    def __init__(self) -> None:
        self.role = ""
        self.device = "cpu"
        self.task = None
        self.model_class = None
        self.model = None
        self.mode = "eager"
        self.kept: list[Any] = []
        self.hide: tuple[str, ...] = ()
        self._flush_buffer = None
        self.fd_in = self.fd_out = -1

    # -- helpers --------------------------------------------------------------------------
    def synchronize(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()  # device-wide: waits for every stream

    def make_inputs(self, seed: int) -> list[Any]:
        import torch

        seed_everything(seed)
        try:
            with torch.device(self.device):  # factories create tensors on the device directly
                inputs = self.task.get_inputs()
        except Exception:
            # Some tasks need host tensors (numpy, CPU generators). Every process takes the same
            # path for the same task, so the inputs still agree.
            seed_everything(seed)
            inputs = self.task.get_inputs()
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def init_inputs(self, seed: int) -> list[Any]:
        seed_everything(seed)
        return list(self.task.get_init_inputs())

    def flush_cache(self) -> None:
        if self._flush_buffer is not None:
            self._flush_buffer.add_(1)

    # -- commands -------------------------------------------------------------------------
    def setup(self, msg: dict) -> dict:
        import torch

        from ..device import probe_device
        from .sandbox import network_isolated

        self.role = msg["role"]
        self.device = msg["device"]
        self.mode = msg.get("mode", "eager")
        self.hide = tuple(str(p) + "/" for p in msg.get("hide_paths", []))
        threads = msg.get("threads")
        if threads:
            torch.set_num_threads(int(threads))
        if self.device == "cuda":
            torch.cuda.set_device(0)
        info = probe_device(self.device)
        if msg.get("flush_cache"):
            # Twice the last-level cache, touched before every timed call.
            n = 2 * int(msg.get("cache_bytes") or info.cache_bytes) // 4
            self._flush_buffer = torch.empty(n, dtype=torch.int32, device=self.device)

        task = _load_module("cuda_agent_task", Path(msg["task_path"]))
        if self.role == "reference":
            self.model_class = task.Model
        else:
            # The candidate process gets the task's input functions, not its reference class.
            del task.Model
            module_path = msg.get("module_path")
            try:
                if module_path:
                    _load_module("cuda_extension", Path(module_path))
            except ImportError as exc:
                # An undefined symbol here is a missing launcher or library: a link-time mistake.
                raise WorkerFailure(ERROR_COMPILE, f"the built extension does not load: {exc}") from None
            try:
                candidate = _load_module("model_new", Path(msg["solution_path"]))
            except Exception as exc:
                kind = ERROR_COMPILE if _is_build_failure(exc) else ERROR_RUNTIME
                raise WorkerFailure(kind, f"importing model_new.py failed:\n{_short_traceback(exc, self.hide)}") from None
            self.model_class = getattr(candidate, "ModelNew", None)
            if self.model_class is None:
                raise WorkerFailure(ERROR_RUNTIME, "model_new.py defines no ModelNew")
        self.task = task
        return {"device": info.to_dict(), "network_isolated": network_isolated(),
                "pid": os.getpid(), "uid": os.getuid()}

    def init_model(self, msg: dict) -> dict:
        """Reference: build Model with freshly drawn weights; return its state dict."""
        import torch

        init = self.init_inputs(msg["weight_seed"])
        seed_everything(msg["weight_seed"])
        model = self.model_class(*init).to(self.device).eval()
        state = {k: v for k, v in model.state_dict().items()}
        self.model = torch.compile(model) if self.mode == "compile" else model
        return {"state_dict": state if msg.get("return_state", True) else {}}

    def load_weights(self, msg: dict) -> dict:
        """Candidate: build ModelNew and load the reference's weights into it, strictly."""
        init = self.init_inputs(msg["weight_seed"])
        model = self.model_class(*init)
        result = model.load_state_dict(msg["state_dict"], strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise WorkerFailure(ERROR_RUNTIME, (
                "ModelNew's parameters do not match Model's state_dict: "
                f"missing {list(result.missing_keys)[:8]}, unexpected {list(result.unexpected_keys)[:8]}. "
                "ModelNew must create the same parameters and buffers as Model."))
        self.model = model.to(self.device).eval()
        return {}

    def run(self, msg: dict) -> dict:
        import torch

        inputs = self.make_inputs(msg["input_seed"])
        with torch.no_grad():
            output = self.model(*inputs)
        self.synchronize()
        return {"output": output}

    def time(self, msg: dict) -> dict:
        """A timing session, driven one step at a time by the judge.

        ``prepare`` (seed) builds that call's inputs, flushes the cache and synchronises;
        ``go`` makes the timed call; ``stop`` ends the session. The judge times both kinds of
        step on its own clock, so time spent outside the measured call shows up there; and it
        sends each seed only when that call is due, so nothing can be computed ahead.
        """
        import torch

        from . import protocol

        cuda = self.device == "cuda"
        start = torch.cuda.Event(enable_timing=True) if cuda else None
        end = torch.cuda.Event(enable_timing=True) if cuda else None
        self.kept = []
        kept_bytes = host_bytes = 0
        inputs = pending = None

        def keep(output: Any) -> None:
            nonlocal kept_bytes, host_bytes
            size = _tensor_bytes(output)
            on_device = cuda and kept_bytes + size <= KEEP_ON_DEVICE_BYTES
            if on_device:
                kept_bytes += size
            else:
                host_bytes += size
            self.kept.append(_snapshot(output, to_host=not on_device))

        gc.collect()
        gc.disable()  # a collection inside a timed call would be noise, for every model alike
        try:
            with torch.no_grad():
                while True:
                    step = protocol.receive(self.fd_in, max_bytes=1 << 20)
                    kind = step.get("step")
                    if pending is not None:  # the previous call's output, copied outside its timing
                        keep(pending)
                        pending = None
                    if kind == "prepare":
                        inputs = self.make_inputs(step["seed"])
                        self.flush_cache()
                        self.synchronize()
                        protocol.send(self.fd_out, {"ok": True})
                    elif kind == "go":
                        t0 = _clock_ns()
                        if cuda:
                            start.record()
                        output = self.model(*inputs)
                        if cuda:
                            end.record()
                        self.synchronize()
                        t1 = _clock_ns()
                        inputs = None
                        reply = {"ok": True, "host_ms": (t1 - t0) / 1e6,
                                 "device_ms": start.elapsed_time(end) if cuda else None,
                                 "full": host_bytes > KEEP_ON_HOST_BYTES}
                        protocol.send(self.fd_out, reply)
                        if step.get("keep"):
                            pending = output
                        del output
                    elif kind == "stop":
                        break
                    else:
                        raise WorkerFailure(ERROR_SETUP, f"unknown timing step {kind!r}")
        finally:
            gc.enable()
        return {"calls": len(self.kept)}

    def outputs(self, msg: dict) -> dict:
        return {"outputs": [self.kept[i] for i in msg["indices"]]}


def _is_build_failure(exc: BaseException) -> bool:
    text = str(exc)
    return "Error building extension" in text or "ninja" in text.lower() and "build" in text.lower()


def _classify(exc: BaseException) -> str:
    if isinstance(exc, WorkerFailure):
        return exc.kind
    return ERROR_RUNTIME


def serve(fd_in: int, fd_out: int) -> None:
    from . import protocol

    worker = Worker()
    worker.fd_in, worker.fd_out = fd_in, fd_out
    handlers: dict[str, Callable[[dict], dict]] = {
        "setup": worker.setup, "init_model": worker.init_model, "load_weights": worker.load_weights,
        "run": worker.run, "time": worker.time, "outputs": worker.outputs,
    }
    while True:
        try:
            msg = protocol.receive(fd_in, max_bytes=1 << 40)
        except protocol.ProtocolError:
            os._exit(0)  # the judge went away
        cmd = msg.get("cmd")
        if cmd == "exit":
            protocol.send(fd_out, {"ok": True})
            os._exit(0)
        try:
            reply = {"ok": True, **handlers[cmd](msg)}
        except BaseException as exc:  # report everything; the judge decides what it means
            message = str(exc) if isinstance(exc, WorkerFailure) else _short_traceback(exc, worker.hide)
            reply = {"ok": False, "error": _classify(exc), "message": message,
                     "exception": type(exc).__name__}
        try:
            protocol.send(fd_out, reply)
        except TypeError as exc:  # e.g. forward returned something that is not tensors
            protocol.send(fd_out, {"ok": False, "error": ERROR_RUNTIME, "exception": "TypeError",
                                   "message": f"the model returned a value the judge cannot compare: {exc}"})


def main() -> None:
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    # Candidate prints go to the log the judge captured as stdout/stderr, never to the channel.
    serve(fd_in, fd_out)


if __name__ == "__main__":
    main()
