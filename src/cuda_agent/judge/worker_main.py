"""The worker: a short-lived process that runs one model (reference or candidate) for the judge.

It receives commands on one file descriptor and answers on another (see ``protocol``). It never
sees the other side's outputs: a reference worker computes expected outputs, a candidate worker
computes the candidate's, and the judge compares them in its own process. A worker is started
fresh for every judging run and killed afterwards; a crash or hang here costs only this process.

Three objects serve the commands (``serve``'s table): ``Worker`` (the process's device, task and
model, set up by ``setup``, which also reports what the sandbox left the process), ``Checks`` (a
check's weights, its forward and its comparisons) and ``Timing`` (the input arena, the timing
session, and what the physical floor needs). By who is asked:

* every worker: ``setup`` (sandbox, device, the model's module), ``run`` (one forward on seeded
  inputs), ``time`` (a timing session, driven one call at a time), ``exit``;
* reference: ``init_model`` (draw the check's weights; on the GPU into each candidate's exchange
  buffer), ``compare_exchanged`` (a candidate's output, from its exchange buffer, against the held
  one), ``compare_held`` (two held outputs of its own), ``held_output`` (a held output sent whole),
  ``release`` (let a held output go), ``workload`` (one forward's FLOPs and bytes), ``peaks`` (the
  device's bandwidth and matmul rate);
* stager (a reference process): ``arena`` (lay out the timed calls' inputs), ``stage`` (the next
  timed call's inputs into it);
* candidate: ``load_weights`` (the reference's weights, from its buffer or sent whole),
  ``inputs`` (checksums of the last call's inputs), ``outputs`` (outputs kept from timed calls).
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

# Outputs of timed calls are kept, as copies in the memory they were made in, for checking after
# the session: up to a quarter of the device's free memory (or this much host memory on the cpu
# backend). When that is full the session ends early, rather than moving copies elsewhere at a
# cost that the judge's overhead comparison would wrongly count against the model.
KEEP_DEVICE_FRACTION = 0.25
KEEP_HOST_BYTES = 4 * 1024**3

# While timing, wait for the judge's next step by polling this long before sleeping.
SPIN_S = 0.005


class WorkerFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _load_module(name: str, path: Path, register: bool = True):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:  # in sys.modules, as an import puts it; load_inline's modules are not
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# Ways the judge varies a check's inputs, so that a solution fitted to one input distribution
# (all positive, unit scale) or an identity that only holds there cannot pass. Floating tensors
# only; applied identically in every process.
INPUT_TRANSFORMS = ("none", "scale_up", "shift", "scale_down")


def widened(t: Any) -> Any:
    """``t`` in float32 where it is an 8-bit float, else itself: PyTorch has next to no
    arithmetic for 8-bit floats (no multiply, no isfinite), so the judge's own arithmetic on
    them is done in float32 and stored back in their dtype."""
    return t.float() if t.is_floating_point() and t.element_size() == 1 else t


def transform_inputs(inputs: list[Any], transform: str) -> list[Any]:
    import torch

    if transform not in INPUT_TRANSFORMS:
        raise WorkerFailure(ERROR_SETUP, f"unknown input transform {transform!r}")
    if transform == "none":
        return inputs
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            wide = widened(x)
            if transform == "scale_up":
                wide = wide * 4
            elif transform == "scale_down":
                wide = wide * 0.25
            else:  # shift: centre non-negative inputs, move centred ones off zero
                wide = wide - wide.abs().mean()
            x = wide.to(x.dtype)
        out.append(x)
    return out


def perturb_parameters(model: Any, seed: int) -> None:
    """Move every floating parameter away from its default init (LayerNorm's 1 and 0, say).

    Each value is scaled by a factor in [0.5, 1.5] and shifted by noise of a tenth of the
    parameter's mean magnitude, so a solution that hard-codes or skips default parameters fails.
    The numbers are drawn on the parameter's own device: a GEMM's weights on the host took
    seconds a check (two draws of 67M values), on the GPU milliseconds.
    """
    import torch

    generators: dict[Any, Any] = {}
    with torch.no_grad():
        for param in model.parameters():
            if not param.is_floating_point() or not param.numel():
                continue
            if param.device not in generators:
                generators[param.device] = torch.Generator(device=param.device).manual_seed(seed % 2**63)
            generator = generators[param.device]
            wide = widened(param)
            scale = float(wide.abs().mean()) or 1.0
            factor = 1 + (torch.rand(param.shape, generator=generator, device=param.device) - 0.5)
            noise = torch.randn(param.shape, generator=generator, device=param.device) * 0.1 * scale
            if wide is param:
                param.mul_(factor.to(param.dtype)).add_(noise.to(param.dtype))
            else:
                param.copy_(wide * factor + noise)


# Every floating input value is scaled by its own factor in [1 - 2^-8, 1 + 2^-8] (8-bit floats,
# whose steps are 2^-3 or 2^-2 apart, in [1 - 2^-2, 1 + 2^-2]: a smaller factor rounds back to
# the same value), drawn from the call's seed: whatever a task's get_inputs does (a generator of
# its own, constants), no two calls see the same inputs, so an output remembered from an earlier
# call is wrong for the next one.
# Signs, zeros, magnitudes, shapes and strides stay as the task made them. Every process varies
# the inputs of a seed alike; a tensor whose elements share memory (an expanded view) cannot vary
# element by element and is left as it is.
INPUT_VARIATION = 2.0 ** -8
NARROW_INPUT_VARIATION = 2.0 ** -2
WEIGHTS_BUFFER = "weights:"  # the reference's exchange buffers for weights, apart from its outputs'


def vary_inputs(inputs: list[Any], seed: int) -> list[Any]:
    import torch

    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            generator = torch.Generator(x.device).manual_seed((seed + 7919 * i) % 2**63)
            noise = torch.rand(x.shape, generator=generator, device=x.device, dtype=torch.float32)
            try:
                with torch.no_grad():
                    varied = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
                    wide = widened(x)
                    if wide is x:
                        torch.mul(x, (1 + INPUT_VARIATION * (2 * noise - 1)).to(x.dtype), out=varied)
                    else:
                        varied.copy_(wide * (1 + NARROW_INPUT_VARIATION * (2 * noise - 1)))
                x = varied.requires_grad_() if x.requires_grad else varied
            except RuntimeError:  # elements that share memory: one factor per element cannot be
                pass
        out.append(x)
    return out


DIGEST_CHUNK = 1 << 20


def input_digests(values: list[Any], key: int) -> list[int | None]:
    """A keyed checksum of each tensor's bytes (None for other values), to tell whether a call
    changed its inputs. Every word is weighted by its position (a table drawn from ``key``,
    scaled per chunk), so moving values around changes it as surely as changing them."""
    import torch

    out: list[int | None] = []
    table: dict[torch.device, torch.Tensor] = {}
    for value in values:
        if not isinstance(value, torch.Tensor):
            out.append(None)
            continue
        try:
            flat = value.detach().reshape(-1).contiguous().view(torch.uint8)
        except (RuntimeError, TypeError):  # a layout with no flat bytes (sparse, quantized)
            out.append(_bytes_digest(value, key))
            continue
        words = flat.view(torch.int32) if flat.numel() % 4 == 0 else flat
        if words.device not in table:
            generator = torch.Generator().manual_seed(key % 2**63)
            table[words.device] = torch.randint(1, 1 << 20, (DIGEST_CHUNK,), generator=generator,
                                                dtype=torch.int64).to(words.device)
        weights = table[words.device]
        digest = (value.numel() * 0x9E3779B97F4A7C15 + len(value.shape)) % 2**64
        for i, offset in enumerate(range(0, words.numel(), DIGEST_CHUNK)):
            chunk = words[offset:offset + DIGEST_CHUNK].to(torch.int64)
            part = int((chunk * weights[:chunk.numel()]).sum().item())
            digest = (digest * 1_000_003 + part * (2 * i + 1)) % 2**64
        out.append(digest)
    return out


def _bytes_digest(value: Any, key: int) -> int:
    import hashlib
    import pickle

    data = pickle.dumps(value.detach().cpu())
    return int.from_bytes(hashlib.blake2b(data, key=key.to_bytes(8, "little"), digest_size=8).digest(), "little")


PLAIN_LEAVES = (int, float, bool, str, type(None))
# torch's own named tuples (torch.return_types: what torch.max(x, 1) returns), and torch.Tensor's
# attributes, both taken before any of the candidate's code has run (``Worker.setup``): a reference
# may return such a tuple, and a method put on torch.Tensor would run when the harness touches an
# output.
_TORCH_TUPLES: frozenset = frozenset()
_TENSOR_ATTRIBUTES: dict[str, Any] = {}


def _check_output_types(value: Any) -> None:
    """The output as forward returns it must be plain data, ready now: torch.Tensor (or Parameter)
    leaves in exact tuples, lists and dicts with string keys, and no torch function or dispatch
    mode left active. A subclass of any of these, or a mode, could compute the contents when the
    harness first touches them, after the clock has stopped. Walked by exact type, through the
    builtin types' own methods: nothing the candidate defined runs here."""
    import torch

    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        raise WorkerFailure(ERROR_RUNTIME, "forward left a torch function or dispatch mode active: it must "
                                           "return with none, as it found them")
    attributes = vars(torch.Tensor)
    if _TENSOR_ATTRIBUTES and (len(attributes) != len(_TENSOR_ATTRIBUTES)
                               or any(attributes.get(k) is not v for k, v in _TENSOR_ATTRIBUTES.items())):
        raise WorkerFailure(ERROR_RUNTIME, "torch.Tensor's methods were replaced or added to")
    if problem := _not_plain(value, 0):
        raise WorkerFailure(ERROR_RUNTIME, problem)


def _not_plain(value: Any, depth: int) -> str | None:
    import torch

    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter or kind in PLAIN_LEAVES:
        return None
    if depth > 32:
        return "forward returned a structure nested more than 32 deep"
    if kind is tuple or kind is list or kind in _TORCH_TUPLES:
        items = list.__iter__(value) if kind is list else tuple.__iter__(value)
    elif kind is dict:
        if any(type(key) not in (str, int) for key in dict.keys(value)):
            return "forward returned a dict with keys other than strings and integers"
        items = dict.values(value)
    elif isinstance(value, torch.Tensor):
        return f"forward returned a {kind.__name__}, a torch.Tensor subclass: return plain tensors"
    else:
        return (f"forward returned a {kind.__name__}: return plain tensors, in tuples, lists or dicts "
                "(exactly those types, not subclasses)")
    for item in items:
        if problem := _not_plain(item, depth + 1):
            return problem
    return None


def _all_finite(value: Any) -> bool:
    return all(bool(widened(t).isfinite().all()) for t in _tensors(value) if t.is_floating_point() or t.is_complex())


def _short_traceback(exc: BaseException, hide: tuple[str, ...]) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    for prefix in hide:
        text = text.replace(prefix, "")
    return text[-3000:]


class KeptOutputs:
    """Copies of timed outputs, for checking after the session, in one buffer made up front.

    Copying each output into fresh memory would take the block the allocator is about to hand
    the model's next call, forcing a device allocation inside that timed call; the model's own
    output memory must be freed and reused exactly as in a user's loop. So the first output
    sizes a buffer of equal slots (up to ``budget_bytes``), and each timed output is copied into
    the next slot. ``full`` says there is no slot left for another call.
    """

    ALIGN = 256

    def __init__(self, device: str, budget_bytes: int, max_calls: int):
        self.device, self.budget, self.max_calls = device, budget_bytes, max(1, max_calls)
        self.buffer = None
        self.slot_bytes = 0
        self.items: list[Any] = []

    def _need(self, value: Any) -> int:
        return sum(-(-t.numel() * t.element_size() // self.ALIGN) * self.ALIGN for t in _tensors(value))

    @property
    def slots(self) -> int:
        return self.buffer.numel() // self.slot_bytes if self.buffer is not None else 0

    @property
    def full(self) -> bool:
        return self.buffer is not None and len(self.items) >= self.slots

    def reserve(self, value: Any) -> None:
        """Make the buffer, sized by ``value`` (a warm-up output), and touch every page of it, so
        that copies after timed calls never pay for first-touch page faults."""
        import torch

        if self.buffer is None:
            self.slot_bytes = max(self._need(value), self.ALIGN)
            slots = max(1, min(self.max_calls, self.budget // self.slot_bytes))
            self.buffer = torch.zeros(slots * self.slot_bytes, dtype=torch.uint8, device=self.device)

    def add(self, value: Any) -> bool:
        """Copy ``value`` into the next slot; False when it does not fit (the session must end)."""
        import torch

        need = max(self._need(value), self.ALIGN)
        self.reserve(value)
        if need > self.slot_bytes or self.full:
            return False
        offset = len(self.items) * self.slot_bytes

        def copy(v: Any) -> Any:
            nonlocal offset
            if isinstance(v, torch.Tensor):
                nbytes = v.numel() * v.element_size()
                dst = self.buffer[offset:offset + nbytes].view(v.dtype).view(v.shape)
                dst.copy_(v.detach())
                offset += -(-nbytes // self.ALIGN) * self.ALIGN
                return dst
            if isinstance(v, tuple):
                return tuple(copy(x) for x in v)
            if isinstance(v, list):
                return [copy(x) for x in v]
            if isinstance(v, dict):
                return {k: copy(x) for k, x in v.items()}
            return v

        self.items.append(copy(value))
        return True


def _tensors(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def output_aliases(inputs: list[Any], output: Any) -> list[list[int]]:
    """[output tensor, input] pairs whose memory overlaps: an output that is an input, a view of
    one, or memory inside one."""
    import torch

    def extent(t: Any) -> tuple[str, int, int] | None:
        storage = t.untyped_storage()
        return (str(t.device), storage.data_ptr(), storage.data_ptr() + storage.nbytes()) if storage.nbytes() else None

    outs = [extent(t) for t in _tensors(output)]
    ins = [extent(x) if isinstance(x, torch.Tensor) else None for x in inputs]
    return [[o, k] for o, a in enumerate(outs) for k, b in enumerate(ins)
            if a and b and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]]


def flush_lengths(setup: dict, cache_bytes: int) -> tuple[int, int]:
    """The flush buffer's length in int32 elements, and the part of it a worker reads where a
    trusted process flushes the shared level: twice the last-level cache (or the judge's
    ``flush_bytes``), and twice the caches below it, at most the whole."""
    n = int(setup.get("flush_bytes") or 2 * cache_bytes) // 4
    return n, min(n, 2 * int(setup.get("private_cache_bytes") or 0) // 4)


class Worker:
    """This process's side of a run: its device, the task's module and the model (a reference or
    the candidate's), the channel, and the exchange buffers shared with another process. ``setup``
    loads them and reports what the sandbox left this process (the judge's record of it);
    ``Checks`` and ``Timing`` serve the other commands on it."""

    def __init__(self) -> None:
        self.trusted = False  # a reference process (the judge says so at setup), not the candidate's
        self.device = "cpu"
        self.task = None
        self.model_class = None
        self.model = None
        self.mode = "eager"
        self.exchanges: list[Any] = []  # reference: every exchange buffer made, kept while it may be mapped
        self.buffers: dict[str, Any] = {}  # reference: the buffer in use for each candidate, by name
        self.mapped: dict[str, Any] = {}  # candidate: exchange buffers mapped, by handle
        self.hide: tuple[str, ...] = ()
        self.flags_before: dict[str, Any] = {}
        self.counter: Any = None  # the op counter (candidates), installed before their import
        self._flush_buffer = None
        self._private_flush_len = 0  # the part of the flush buffer that covers the private caches
        self._persisting_l2: Callable[[], None] | None = None
        self.fd_in = self.fd_out = -1
        self.arena_fd = -1  # the cpu backend's input arena (a memfd from the judge), if given

    def synchronize(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()  # device-wide: waits for every stream

    def make_inputs(self, seed: int, transform: str = "none") -> list[Any]:
        return transform_inputs(self._task_inputs(seed), transform)

    def _task_inputs(self, seed: int) -> list[Any]:
        import torch

        inputs = self.made_on_device(seed, self.task.get_inputs)
        return vary_inputs([x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs], seed)

    def made_on_device(self, seed: int, make: Callable[[], Any]) -> Any:
        """``make()`` from the random state ``seed`` with torch's factories creating tensors on the
        device directly (drawn there, not on the host and copied); again on the host where it
        fails there (some tasks need host tensors: numpy, CPU generators). Every process takes the
        same path for the same task, so what it makes still agrees."""
        import torch

        seed_everything(seed)
        try:
            with torch.device(self.device):
                return make()
        except Exception:
            seed_everything(seed)
            return make()

    def init_inputs(self, seed: int) -> list[Any]:
        seed_everything(seed)
        return list(self.task.get_init_inputs())

    def flush_cache(self, private_only: bool = False) -> None:
        """Evict the cache; ``private_only``: only the caches below the shared last level (cpu),
        whose flush a trusted process sharing that level does."""
        # Persisting L2 lines survive a flush (a model could pin its data there): give the
        # carve-out back and evict them first.
        if self._persisting_l2 is not None:
            self._persisting_l2()
        # Read, not write: a writing flush leaves the cache full of dirty lines that the timed
        # call would then have to write back while it streams its own data.
        if self._flush_buffer is not None:
            private = private_only and self._private_flush_len > 0  # not told their size: all of it
            (self._flush_buffer[:self._private_flush_len] if private else self._flush_buffer).amax()

    def setup(self, msg: dict) -> dict:
        import torch

        from ..device import probe_device
        from .sandbox import effective_capabilities, network_isolated, writable_outside
        from .seccomp import filters_installed

        self.trusted = msg["role"] == "reference"
        self.device = msg["device"]
        if self.trusted and self.device == "cpu":
            # Not dumpable: a process of the same user cannot trace this one or read its memory
            # (expected outputs) through /proc. Not on cuda, whose driver must write this
            # process's /proc entries, which then belong to root.
            import ctypes

            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        self.mode = msg.get("mode", "eager")
        self.hide = tuple(str(p) + "/" for p in msg.get("hide_paths", []))
        threads = msg.get("threads")
        if threads:
            torch.set_num_threads(int(threads))
        if self.device == "cuda":
            torch.cuda.set_device(0)
            if msg.get("warm_profiler"):
                from .recording import warm_profiler

                warm_profiler()
        info = probe_device(self.device)
        if msg.get("flush_cache"):
            n, self._private_flush_len = flush_lengths(msg, info.cache_bytes)
            self._flush_buffer = torch.ones(n, dtype=torch.int32, device=self.device)
            if self.device == "cuda":
                self._persisting_l2 = _persisting_l2_reset()

        from .recording import numerics_flags

        self.flags_before = numerics_flags()  # before any candidate code runs
        global _TORCH_TUPLES, _TENSOR_ATTRIBUTES
        _TORCH_TUPLES = frozenset(t for t in vars(torch.return_types).values()
                                  if isinstance(t, type) and issubclass(t, tuple))
        _TENSOR_ATTRIBUTES = dict(vars(torch.Tensor))
        if msg.get("subreaper"):
            # The candidate's detached processes stay below this one (process_tree); set only now,
            # after the CUDA driver has started.
            import ctypes

            ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        late_rules: bool | str | None = None
        if msg.get("refuse_late"):
            # Now that the CUDA driver is up (it opens a Unix socket of its own while it starts),
            # and before any of the candidate's code is loaded. Programs too: the candidate's
            # process runs no compiler, linker or anything else (a load_inline is the judge's build).
            from .seccomp import SeccompUnavailable, refuse_late

            try:
                refuse_late()
                late_rules = True
            except (SeccompUnavailable, OSError) as exc:
                late_rules = str(exc)
        task = _load_module("cuda_agent_task", Path(msg["task_path"]))
        if self.trusted:
            self.model_class = task.Model
        else:
            # The candidate process gets the task's input functions, not its reference class.
            del task.Model
            if msg.get("op_counter"):
                from .op_counter import load as load_counter

                self.counter = load_counter(msg["op_counter"])
            module_path = msg.get("module_path")
            try:
                if module_path:
                    _load_module("cuda_extension", Path(module_path))
            except ImportError as exc:
                # An undefined symbol here is a missing launcher or library: a link-time mistake.
                raise WorkerFailure(ERROR_COMPILE, f"the built extension does not load: {exc}") from None
            if msg.get("inline_builds"):
                import torch.utils.cpp_extension

                torch.utils.cpp_extension.load_inline = self._judge_built_load_inline
                torch.utils.cpp_extension.load = _no_file_builds
            try:
                candidate = _load_module("model_new", Path(msg["solution_path"]))
            except WorkerFailure:
                raise
            except Exception as exc:
                raise WorkerFailure(ERROR_RUNTIME,
                                    f"importing model_new.py failed:\n{_short_traceback(exc, self.hide)}") from None
            self.model_class = getattr(candidate, "ModelNew", None)
            if self.model_class is None:
                raise WorkerFailure(ERROR_RUNTIME, "model_new.py defines no ModelNew")
        self.task = task
        writable = writable_outside(Path(os.environ.get("HOME", "/")))
        return {"device": info.to_dict(), "network_isolated": network_isolated(),
                "filesystem_confined": not writable, "writable_outside": writable,
                "seccomp_filters": filters_installed(), "late_rules": late_rules,
                "capabilities": effective_capabilities(),
                "pid": os.getpid(), "uid": os.getuid()}

    def _judge_built_load_inline(self, *args: Any, **kwargs: Any):
        """``load_inline`` in the candidate's process: the judge builds the call's sources
        (inline_extension) while this waits, and the module it built is imported."""
        from . import protocol
        from .inline_extension import InlineCall, InlineCallError

        try:
            call = InlineCall.from_arguments(*args, **kwargs)
        except (InlineCallError, TypeError) as exc:
            raise WorkerFailure(ERROR_COMPILE, f"load_inline: {exc}") from None
        protocol.send(self.fd_out, {"request": "build_inline", "call": call.to_message()})
        answer = protocol.receive(self.fd_in, max_bytes=1 << 20)
        if not isinstance(answer.get("path"), str):
            raise WorkerFailure(str(answer.get("error", ERROR_COMPILE)), str(answer.get("message", "")))
        try:
            return _load_module(call.name, Path(answer["path"]), register=False)
        except ImportError as exc:
            raise WorkerFailure(ERROR_COMPILE, f"the module load_inline built does not load: {exc}") from None

    def exchange_buffer(self, name: str, nbytes: int) -> Any:
        """Reference: the exchange buffer ``name``, of ``nbytes`` at least: the one made before,
        or a new one where there was none or it is too small."""
        from . import device_exchange

        if name not in self.buffers or self.buffers[name].nbytes < nbytes:
            # An older buffer stays allocated: the candidate may still have it mapped.
            self.buffers[name] = device_exchange.ExchangeBuffer(nbytes)
            self.exchanges.append(self.buffers[name])
        return self.buffers[name]

    def map_buffer(self, handle: str) -> Any:
        """Candidate: the reference's exchange buffer ``handle``, mapped once."""
        from . import device_exchange

        if handle not in self.mapped:
            self.mapped[handle] = device_exchange.MappedBuffer(handle)
        return self.mapped[handle]

    def share(self, output: Any, exchange: dict, reply: dict) -> Any:
        """Candidate: copy ``output`` into the reference's exchange buffer and return its
        description; where the buffer cannot be mapped, the output itself, to go whole, with the
        reason in ``reply``."""
        from . import device_exchange

        try:
            mapped = self.map_buffer(str(exchange["handle"]))
        except device_exchange.ExchangeUnavailable as exc:
            reply["exchange_error"] = str(exc)
            return output
        description = device_exchange.place(output, mapped.tensor, list(exchange["slots"]))
        self.synchronize()  # the copies are complete before the reference reads them
        return description


class Checks:
    """A check's commands: the weights drawn (reference) and loaded (candidate), one forward on
    seeded inputs with its records, and the reference's held outputs compared on its device."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._model64: tuple[tuple[int, ...], Any] | None = None
        self.held: dict[str, Any] = {}  # reference outputs kept on the device by name (``run``'s ``hold``)
        self.held_norms: dict[str, Any] = {}  # and their float64 norms, for the precision check
        self._last_inputs: list[Any] | None = None

    def init_model(self, msg: dict) -> dict:
        """Reference: build Model with freshly drawn weights; return its state dict."""
        import torch

        init = self.worker.init_inputs(msg["weight_seed"])
        model = self._construct(init, msg["weight_seed"]).eval()
        if msg.get("perturb"):
            perturb_parameters(model, msg["weight_seed"])
        state = {k: v for k, v in model.state_dict().items()}
        self.worker.model = torch.compile(model) if self.worker.mode == "compile" else model
        self._model64 = None  # new weights: the float64 copy is made again when first needed
        if not msg.get("return_state", True):
            return {"state_dict": {}}
        if msg.get("share"):
            return self._offer_weights(state, [str(n) for n in msg["share"]])
        return {"state_dict": state}

    def _offer_weights(self, state: dict, names: list[str]) -> dict:
        """Reference: the weights copied into an exchange buffer for each of ``names`` (a group's
        candidates have one each, so none can change what another loads), for the candidate to
        copy on the device: a GEMM's 256 MB crossed two pipes and the host twice a check. Where
        CUDA IPC does not work or a tensor is in host memory, the weights go whole."""
        from . import device_exchange
        from .correctness import tensor_leaves

        leaves = tensor_leaves(state)
        if not leaves or any(t.device.type != "cuda" for t in leaves):
            return {"state_dict": state}
        slots, nbytes = device_exchange.layout(state)
        try:
            buffers = {name: self.worker.exchange_buffer(WEIGHTS_BUFFER + name, nbytes) for name in names}
        except device_exchange.ExchangeUnavailable:
            return {"state_dict": state}
        offers = {name: {"handle": buffer.handle, "state_dict": device_exchange.place(state, buffer.tensor, slots)}
                  for name, buffer in buffers.items()}
        self.worker.synchronize()  # the copies are complete before a candidate reads them
        return {"state_dict": {}, "weights": offers}

    def load_weights(self, msg: dict) -> dict:
        """Candidate: build ModelNew and load the reference's weights into it, strictly."""
        state = msg["state_dict"]
        if isinstance(offer := msg.get("weights"), dict):  # the reference's weights, on the device
            from . import device_exchange

            try:
                mapped = self.worker.map_buffer(str(offer["handle"]))
            except device_exchange.ExchangeUnavailable as exc:
                return {"weights_error": str(exc)}  # the judge sends them whole instead
            state, _ = device_exchange.rebuild(offer["state_dict"], mapped.tensor)
        init = self.worker.init_inputs(msg["weight_seed"])
        model = self._construct(init, msg["weight_seed"])
        result = model.load_state_dict(state, strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise WorkerFailure(ERROR_RUNTIME, (
                "ModelNew's parameters do not match Model's state_dict: "
                f"missing {list(result.missing_keys)[:8]}, unexpected {list(result.unexpected_keys)[:8]}. "
                "ModelNew must create the same parameters and buffers as Model."))
        self.worker.model = model.eval()
        return {}

    def _construct(self, init: list[Any], seed: int) -> Any:
        """The model class built from ``init`` on the device (a GEMM's 67M-value init took most of
        a second a check on the host), or on the host and moved (``made_on_device``)."""
        return self.worker.made_on_device(seed, lambda: self.worker.model_class(*init)).to(self.worker.device)

    def run(self, msg: dict) -> dict:
        """One forward on seeded inputs.

        The reference falls back to untransformed inputs when a transform takes the task
        outside its domain (non-finite outputs), and says which transform it applied. The
        candidate can be asked to record evidence: ``ops`` (ATen dispatch), ``kernels`` (GPU
        profile), and always reports threads around the call and its numerics flags.
        """
        import torch

        from . import recording

        transform = msg.get("transform", "none")
        inputs = self.worker.make_inputs(msg["input_seed"], transform)
        if self.worker.trusted and msg.get("reseed") is not None:
            # The determinism probe: the same inputs, but the random state forward starts from
            # differs, so a forward that draws random numbers shows it.
            seed_everything(int(msg["reseed"]))
        record = msg.get("record") or {}
        evidence: dict[str, Any] = {}

        counter = self.worker.counter  # candidates only

        def forward():
            with torch.no_grad():
                if counter is None:
                    return self.worker.model(*inputs)
                counter.begin()  # around the model alone: not the profiler's or the harness's ops
                try:
                    return self.worker.model(*inputs)
                finally:
                    counter.end()

        key = msg.get("digest_key") if self.worker.trusted else None
        before = input_digests(inputs, key) if key is not None else None
        recording.profiler_ready()  # its start would change the thread count of this call
        threads_before = recording.thread_count()
        if record.get("kernels") and self.worker.device == "cuda":
            output, evidence["kernels"] = recording.record_kernels(forward)
        elif record.get("ops"):
            output, evidence["ops"] = recording.record_ops(forward)
        else:
            output = forward()
        self.worker.synchronize()
        if counter is not None:
            evidence["counted_ops"], evidence["counter_watching"] = counter.take(), counter.watching()
        _check_output_types(output)
        if self.worker.trusted and transform != "none" and not _all_finite(output):
            transform = "none"
            inputs = self.worker.make_inputs(msg["input_seed"])
            before = input_digests(inputs, key) if key is not None else None
            output = forward()
            self.worker.synchronize()
        reply: dict[str, Any] = {"output": output, "transform": transform, "aliases": output_aliases(inputs, output)}
        self._last_inputs = inputs
        if key is not None:
            # The reference's inputs before and after its forward, and the values of any input
            # it changes in place, for the judge to hold the candidate's to (see ``inputs``).
            reply.update(self.inputs({"digest_key": key}))
            reply["inputs_before"] = before
            changed = [i for i, (b, a) in enumerate(zip(before, reply["inputs_after"])) if b != a]
            reply["inputs"] = {str(i): inputs[i] for i in changed}
        if not self.worker.trusted:
            evidence["threads_before"] = threads_before
            evidence["threads_after"] = recording.thread_count()
            evidence["flags_before"] = self.worker.flags_before
            evidence["flags_after"] = recording.numerics_flags()
            reply["evidence"] = evidence
        if self.worker.trusted and msg.get("float64"):
            reply["float64"] = self._float64_norms(msg["input_seed"], transform, output)
        if msg.get("audit"):
            reply["identity_passes"] = self._identity_passes(inputs, output, msg.get("tolerance", (1e-2, 1e-2)))
        if self.worker.trusted and msg.get("hold"):
            exchange = msg.get("exchange")
            self._hold(str(msg["hold"]), output, reply,
                       exchange if isinstance(exchange, (list, str)) else bool(exchange), bool(msg.get("copy")))
        if not self.worker.trusted and msg.get("exchange"):
            reply["output"] = self.worker.share(output, msg["exchange"], reply)
        return reply

    def _hold(self, name: str, output: Any, reply: dict, exchange: bool | str | list, copy: bool = False) -> None:
        """Keep a reference output where it was computed, for ``compare_held`` or
        ``compare_exchanged``: it never crosses to the judge. With ``copy``, a copy of it: a model
        that returns the same memory on every call would otherwise hold one output under two
        names, which always agree. With ``exchange``, the reply carries
        the exchange buffer the candidate writes its output into (``device_exchange``), and the
        audit's sample of the output; where CUDA IPC does not work, the output goes whole.
        ``exchange`` a list of names: one buffer for each (``exchanges`` in the reply), for the
        candidates of a group judged against this one output, none of which sees another's; a name:
        that candidate's buffer alone."""
        from . import device_exchange
        from .audit import sample_output
        from .correctness import map_tensors, tensor_leaves

        if exchange:
            if any(t.device.type != "cuda" for t in tensor_leaves(output)):
                # The buffer's views live on the GPU; a tensor in host memory is compared on the host.
                reply["exchange_error"] = "the reference's output has tensors in host memory"
                return
            slots, nbytes = device_exchange.layout(output)
            names = [str(n) for n in exchange] if isinstance(exchange, list) else [exchange if isinstance(exchange, str) else ""]
            try:
                for buffer in names:
                    self.worker.exchange_buffer(buffer, nbytes)
            except device_exchange.ExchangeUnavailable as exc:
                reply["exchange_error"] = str(exc)
                return
            offers = {n: {"handle": self.worker.buffers[n].handle, "slots": slots} for n in names}
            if isinstance(exchange, list):
                reply["exchanges"] = offers
            else:
                reply["exchange"] = offers[names[0]]
            reply["sample"] = sample_output(output)
        self.held[name] = map_tensors(lambda t: t.detach().clone(), output) if copy else output
        self.held_norms[name] = reply.get("float64")
        reply["output"] = None

    def compare_exchanged(self, msg: dict) -> dict:
        """Reference: the candidate's output, rebuilt from its description as views of the exchange
        buffer, against the held output, on the device; and its precision errors where the check
        passed (``correctness.precision_errors``). The candidate's description is not trusted: one
        that does not fit the buffer, or that claims a tensor matching the reference's dtype and
        shape was not copied, fails the check. ``buffer``: the name of the candidate's buffer (a
        group's); ``keep``: the held output stays for the group's other candidates (``release``)."""
        from . import device_exchange, protocol
        from .correctness import CheckResult, compare_and_measure

        name, index, phase = str(msg["hold"]), int(msg["index"]), str(msg["phase"])
        tolerance = msg["tolerance"]
        # The candidate's description crossed the channel, so its tuples are plain and its dict
        # keys strings: the held output is compared in that form, as on the host.
        expected, norms = protocol.as_received(self._held(msg)), self.held_norms.get(name)
        if not msg.get("keep"):
            self.held_norms.pop(name, None)
        try:
            buffer = self.worker.buffers[str(msg.get("buffer", ""))]
            candidate, complete = device_exchange.rebuild(msg["output"], buffer.tensor)
        except device_exchange.MalformedOutput as exc:
            failed = CheckResult(index, False, message=f"the candidate's description of its output is malformed: {exc}",
                                 phase=phase)
            return {"check": failed.to_dict(), "precision_errors": []}
        check, errors = compare_and_measure(candidate, expected, index, float(tolerance["atol"]),
                                            float(tolerance["rtol"]), norms, phase=phase,
                                            norm_rtol=tolerance.get("norm_rtol"), values=complete)
        if check.passed and not complete:
            check = CheckResult(index, False, phase=phase, message=(
                "the candidate's process left out of the exchange buffer a tensor that matches the reference's"))
        return {"check": check.to_dict(), "precision_errors": [list(e) for e in errors]}

    def held_output(self, msg: dict) -> dict:
        """Reference: a held output, sent whole (where the candidate could not use the buffer)."""
        return {"output": self._held(msg)}

    def _held(self, msg: dict) -> Any:
        """The output held under ``msg["hold"]``: kept with ``msg["keep"]``, else let go."""
        name = str(msg["hold"])
        return self.held[name] if msg.get("keep") else self.held.pop(name)

    def release(self, msg: dict) -> dict:
        """Reference: let go of a held output that a group's candidates were compared with."""
        self.held.pop(str(msg["hold"]), None)
        self.held_norms.pop(str(msg["hold"]), None)
        return {}

    def compare_held(self, msg: dict) -> dict:
        """Reference: compare two outputs this process holds (``run``'s ``hold``), where they
        live (on the GPU for the cuda backend), then let them go. Trusted outputs only: a
        reference against itself, as the determinism probe does."""
        from .correctness import compare_outputs

        tolerance = msg["tolerance"]
        try:
            check = compare_outputs(self.held[msg["candidate"]], self.held[msg["reference"]], int(msg.get("index", 0)),
                                    float(tolerance["atol"]), float(tolerance["rtol"]),
                                    norm_rtol=tolerance.get("norm_rtol"))
        finally:
            self.held.clear()
        return {"check": check.to_dict()}

    def _float64_norms(self, seed: int, transform: str, output: Any) -> dict[str, Any] | None:
        """``correctness.float64_norms`` of this call's output against the reference run in
        float64 (not run where no output is float32, float16 or bfloat16: float64 outputs are
        their own yardstick). "unchecked" where the model cannot run in float64 (the task itself
        offers no yardstick), and "unmeasured" where the float64 run did not fit in memory twice,
        so that the judge pays no speedup on precision it could not measure (a candidate holding
        memory must not switch the check off)."""
        import torch

        from .correctness import WIDENED, dtype_name, float64_norms, tensor_leaves

        if not any(dtype_name(t.dtype) in WIDENED for t in tensor_leaves(output)):
            return {"errors": {}}
        for _ in range(2):
            try:
                return float64_norms(output, self._float64_output(seed, transform))
            except Exception as exc:  # noqa: BLE001 - an op without float64 support: no yardstick
                if not _out_of_memory(exc):
                    return {"unchecked": f"the reference cannot run in float64 ({type(exc).__name__}: "
                                         f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''})"}
            self._model64 = None  # what this process holds for the check goes, then once more
            gc.collect()
            if self.worker.device == "cuda":
                torch.cuda.empty_cache()
        return {"unmeasured": "the reference's float64 run ran out of memory"}

    def _float64_output(self, seed: int, transform: str) -> Any:
        """The reference computed in float64 (its floating parameters and inputs widened) on the
        same inputs, the yardstick for its float32, float16 and bfloat16 outputs."""
        import copy

        import torch

        # One float64 copy per state of the weights (a tensor's version counts its in-place
        # changes): the rechecks of timed calls reuse the last check's.
        state = tuple(getattr(t, "_version", -1) for t in self.worker.model.state_dict(keep_vars=True).values())
        if self._model64 is None or self._model64[0] != state:
            self._model64 = None  # the old copy goes before the new one is made, not after
            self._model64 = (state, copy.deepcopy(self.worker.model).to(torch.float64))
        model = self._model64[1]
        narrow = (torch.float32, torch.float16, torch.bfloat16)
        inputs = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.dtype in narrow else x
                  for x in self.worker.make_inputs(seed, transform)]
        with torch.no_grad():
            exact = model(*inputs)
        self.worker.synchronize()
        return exact

    @staticmethod
    def _identity_passes(inputs: list[Any], output: Any, tolerance: tuple[float, float]) -> bool:
        """Whether returning one of the inputs unchanged would pass as this output."""
        import torch

        from .correctness import compare_outputs, differs_at_a_glance

        if not isinstance(output, torch.Tensor):
            return False
        atol, rtol = tolerance
        # Most inputs differ from the output at a glance; only those that do not are compared in
        # full (half of a small task's check was this comparison).
        return any(not differs_at_a_glance(x, output, atol, rtol) and compare_outputs(x, output, 0, atol, rtol).passed
                   for x in inputs if isinstance(x, torch.Tensor) and x.shape == output.shape and x.dtype == output.dtype)

    def inputs(self, msg: dict) -> dict:
        """Keyed checksums of the last ``run``'s inputs as forward left them, and the values of
        those the judge names. Asked of the candidate only after its outputs were sent, so that
        nothing here delays the thread and output checks of the call itself."""
        inputs = self._last_inputs or []
        wanted = [int(i) for i in msg.get("return_inputs", []) if 0 <= int(i) < len(inputs)]
        return {"inputs_after": input_digests(inputs, int(msg["digest_key"])),
                "inputs": {str(i): inputs[i] for i in wanted}}


class Timing:
    """A timing session's commands: the input arena (stager), the session itself, the outputs
    kept from its calls, and the workload and device peaks the physical floor needs."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.kept: list[Any] = []
        self._cycles_per_ms: float | None = None
        self._device_wait: Any = None  # device_wait.DeviceWait, made on the first timed call
        # The input arena (input_arena): its uint8 tensor, the slots of the inputs in it, and
        # what keeps its memory mapped (the stager writes into it; the timed workers' calls read it).
        self._arena: tuple[Any, list[list[Any]], Any] | None = None

    def arena(self, msg: dict) -> dict:
        """Stager: lay the task's inputs out in an arena the timed workers map (input_arena),
        from two seeds' inputs, which must agree in structure; or say why they cannot be."""
        from . import input_arena

        try:
            slots, nbytes = input_arena.layout(self.worker.make_inputs(int(msg["seed"])), self.worker.device)
            again = input_arena.layout(self.worker.make_inputs(int(msg["check_seed"])), self.worker.device)
            if again != (slots, nbytes):
                raise input_arena.Unstageable("the task's inputs differ in structure from one call to the next")
        except input_arena.Unstageable as exc:
            return {"staged": False, "why": str(exc)}
        handle = None
        if self.worker.device == "cuda":
            from .device_exchange import ExchangeBuffer, ExchangeUnavailable

            try:
                buffer = ExchangeBuffer(nbytes)
            except ExchangeUnavailable as exc:
                return {"staged": False, "why": str(exc)}
            self._arena, handle = (buffer.tensor, slots, buffer), buffer.handle
        else:
            if self.worker.arena_fd < 0:
                return {"staged": False, "why": "this process was given no arena"}
            try:
                os.ftruncate(self.worker.arena_fd, nbytes)
                tensor, mapping = input_arena.host_arena(self.worker.arena_fd, nbytes)
            except OSError as exc:  # only the judge and the candidate hold it besides this process
                return {"staged": False, "tampered": f"the input arena could not be sized and mapped ({exc})"}
            self._arena = (tensor, slots, mapping)
        return {"staged": True, "slots": slots, "nbytes": nbytes, "handle": handle}

    def stage(self, msg: dict) -> dict:
        """Stager: the next timed call's inputs into the arena, and the cache flushed behind
        them, for the call another process makes next."""
        from . import input_arena

        arena, slots, _ = self._arena
        input_arena.stage(self.worker.make_inputs(int(msg["seed"])), arena, slots)
        self.worker.flush_cache()
        self.worker.synchronize()
        return {}

    def _map_arena(self, arena: dict) -> None:
        """A timed worker: map the stager's arena (once: every session of a run stages into the
        same one; a group's reference, the calibration of each of its candidates in turn, maps
        each candidate's stager's arena in its turn)."""
        from . import input_arena

        if self._arena is not None and (self.worker.device != "cuda" or self._arena[2].handle == arena["handle"]):
            return
        nbytes = int(arena["nbytes"])
        if self.worker.device == "cuda":
            from .device_exchange import MappedBuffer

            mapped = MappedBuffer(arena["handle"])
            self._arena = (mapped.tensor[:nbytes], arena["slots"], mapped)
        else:
            tensor, mapping = input_arena.host_arena(self.worker.arena_fd, nbytes)
            self._arena = (tensor, arena["slots"], mapping)

    def time(self, msg: dict) -> dict:
        """A timing session, driven one step at a time by the judge.

        ``prepare`` (seed) builds that call's inputs, flushes the cache (with ``flush``
        "private", only the caches below the shared last level) and synchronises; ``flush``
        flushes the whole cache, for the call another process makes next; ``go`` (window) makes
        the timed call; ``stop`` ends the session. On the cuda backend the
        call is queued behind a device-side wait of ``window_ms`` and bracketed by CUDA events,
        so the events time the device's work while the host's path through the call overlaps the
        wait (see ``timing``). The judge times both kinds of step on its own clock, so time spent
        outside the measured call shows up there; and it sends each seed only when that call is
        due, so nothing can be computed ahead.

        With an input arena (``arena``) a ``prepare`` step carries no seed: the call's inputs are
        views of the arena, which the stager, a trusted process of its own, fills (its ``stage``
        command) after this prepare step and before the go, flushing the cache behind them.
        """
        import torch

        from . import input_arena, protocol, recording
        from .device_wait import RESIDENT_TIMEOUT_S

        cuda = self.worker.device == "cuda"
        counter = self.worker.counter
        waited, start, end = ((torch.cuda.Event(enable_timing=True) for _ in range(3)) if cuda
                              else (None, None, None))
        budget = int(torch.cuda.mem_get_info()[0] * KEEP_DEVICE_FRACTION) if cuda else KEEP_HOST_BYTES
        kept = KeptOutputs(self.worker.device, budget, int(msg.get("max_calls", 100)))
        if msg.get("arena"):
            self._map_arena(msg["arena"])
        keeping = bool(msg.get("keep", True))  # baselines keep nothing
        self.kept = kept.items
        inputs = None
        # One core for the timing thread: no migrations between calls, for every model alike.
        previous_affinity = os.sched_getaffinity(0)
        if msg.get("cores"):
            os.sched_setaffinity(0, set(msg["cores"]))

        gc.collect()
        gc.disable()  # a collection inside a timed call would be noise, for every model alike
        try:
            with torch.no_grad():
                spin = SPIN_S
                while True:
                    step = protocol.receive(self.worker.fd_in, max_bytes=1 << 20, spin_s=spin)
                    # Poll for the next step right after this one, unless the judge says it
                    # comes later (interleaved sessions): then sleep and leave the core free.
                    linger = step.get("linger_s")
                    spin = SPIN_S if linger is None else float(linger)
                    kind = step.get("step")
                    if kind == "prepare":
                        if step.get("staged"):
                            arena, slots, _ = self._arena
                            inputs = input_arena.views(arena, slots)
                        else:
                            inputs = self.worker.make_inputs(step["seed"])
                        self.worker.flush_cache(private_only=step.get("flush") == "private")
                        self.worker.synchronize()
                        # Whether this call's output could still be kept: if not, the judge stops.
                        protocol.send(self.worker.fd_out, {"ok": True, "full": kept.full})
                    elif kind == "flush":
                        # The shared cache, flushed here for whichever process is timed next.
                        self.worker.flush_cache()
                        self.worker.synchronize()
                        protocol.send(self.worker.fd_out, {"ok": True})
                    elif kind == "go":
                        cycles = self._window_cycles(float(step.get("window_ms") or 0.0)) if cuda else 0
                        threads_before = recording.thread_count()
                        if counter is not None:
                            counter.begin()  # as in every call, checks included
                        t0 = _clock_ns()
                        if cuda:
                            waited.record()
                            if cycles:
                                self._device_wait.queue(cycles)
                            start.record()
                            # The device is held from here to the window's end: no stream runs early.
                            if cycles and not self._device_wait.hold():
                                raise WorkerFailure(ERROR_SETUP, "the judge's device-side wait did not start within "
                                                    f"{RESIDENT_TIMEOUT_S:.0f} s: the device is held by other work")
                        output = self.worker.model(*inputs)
                        returned = _clock_ns()
                        # The inputs are let go inside the measured call: finalizers and weakref
                        # callbacks the model hung on them run (and launch) here, where they count.
                        inputs = None
                        if cuda:
                            end.record()
                        self.worker.synchronize()
                        t1 = _clock_ns()
                        if counter is not None:
                            counter.end()
                        _check_output_types(output)
                        # Copied as forward left it: a thread still filling it cannot finish first.
                        if step.get("keep") and not kept.add(output):
                            raise WorkerFailure(ERROR_RUNTIME, "a timed output changed size between calls")
                        if keeping and not step.get("keep"):
                            kept.reserve(output)  # a warm-up call: make the buffer now
                        reply = {"ok": True, "host_ms": (t1 - t0) / 1e6, "call_ms": (returned - t0) / 1e6,
                                 "device_ms": start.elapsed_time(end) if cuda else None,
                                 "window_ms": waited.elapsed_time(start) if cuda else None,
                                 "threads": recording.thread_count() - threads_before}
                        protocol.send(self.worker.fd_out, reply)
                        del output
                    elif kind == "stop":
                        break
                    else:
                        raise WorkerFailure(ERROR_SETUP, f"unknown timing step {kind!r}")
        finally:
            gc.enable()
            os.sched_setaffinity(0, previous_affinity)
        reply: dict[str, Any] = {"calls": len(self.kept)}
        if counter is not None:  # every op the session's calls dispatched, for the judge to assess
            reply.update(ops=counter.take(), counter_watching=counter.watching())
        return reply

    def _window_cycles(self, window_ms: float) -> int:
        """GPU clock cycles for a device-side wait of ``window_ms``, measured on first use (by
        then the warm-up calls have brought the clock up; a slower clock only lengthens it).
        The wait fills every SM (``device_wait``), so no stream's work can run during it."""
        import torch

        from .device_wait import DeviceWait, DeviceWaitError

        if window_ms <= 0:
            return 0
        if self._cycles_per_ms is None:
            try:
                self._device_wait = DeviceWait()
            except DeviceWaitError as e:
                raise WorkerFailure(ERROR_SETUP, f"the judge's device-side wait cannot run here: {e}") from None
            probe = 1_000_000
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            self._device_wait.queue(probe)
            b.record()
            b.synchronize()
            self._cycles_per_ms = probe / max(a.elapsed_time(b), 1e-3)
        return max(1, int(window_ms * self._cycles_per_ms))

    def outputs(self, msg: dict) -> dict:
        """Candidate: kept outputs of timed calls; with ``exchange``, one, into the exchange buffer."""
        reply: dict[str, Any] = {"outputs": [self.kept[i] for i in msg["indices"]]}
        if msg.get("exchange") and len(reply["outputs"]) == 1:
            reply["outputs"] = [self.worker.share(reply["outputs"][0], msg["exchange"], reply)]
        return reply

    def workload(self, msg: dict) -> dict:
        """Reference: FLOPs and bytes of one forward, for the physical floor and the roofline."""
        import torch

        from .floor import count_workload

        inputs = self.worker.make_inputs(msg["input_seed"])
        with torch.no_grad():
            output = self.worker.model(*inputs)
        return count_workload(self.worker.model, inputs, _tensors(output))

    def peaks(self, msg: dict) -> dict:
        """Reference: this device's memory bandwidth and matmul rate."""
        from .floor import measure_peaks

        return measure_peaks(self.worker.device).to_dict()


def _persisting_l2_reset() -> Callable[[], None] | None:
    """A function that sets the persisting-L2 limit to 0 and evicts persisting lines, through
    the CUDA runtime this process already loaded; None where that runtime cannot be found."""
    import ctypes

    from .recording import CUDA_LIMIT_PERSISTING_L2, cudart

    library = cudart()
    if library is None:
        return None

    def clear() -> None:
        library.cudaDeviceSetLimit(ctypes.c_int(CUDA_LIMIT_PERSISTING_L2), ctypes.c_size_t(0))
        library.cudaCtxResetPersistingL2Cache()

    return clear


def _out_of_memory(exc: BaseException) -> bool:
    """A device or host allocation that failed (torch raises OutOfMemoryError on the GPU and a
    RuntimeError naming the allocator on the CPU)."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _no_file_builds(*args: Any, **kwargs: Any):
    """``torch.utils.cpp_extension.load`` in a single-file candidate's process, which runs no compiler."""
    raise WorkerFailure(ERROR_COMPILE, "torch.utils.cpp_extension.load builds files at run time, which the judge "
                                       "does not do; pass the sources as strings to load_inline, which the judge builds")


def _classify(exc: BaseException) -> str:
    if isinstance(exc, WorkerFailure):
        return exc.kind
    return ERROR_RUNTIME


def serve(fd_in: int, fd_out: int, arena_fd: int = -1) -> None:
    from . import protocol

    worker = Worker()
    worker.fd_in, worker.fd_out, worker.arena_fd = fd_in, fd_out, arena_fd
    checks, timing = Checks(worker), Timing(worker)
    handlers: dict[str, Callable[[dict], dict]] = {
        "setup": worker.setup,
        "init_model": checks.init_model, "load_weights": checks.load_weights, "run": checks.run,
        "inputs": checks.inputs, "compare_held": checks.compare_held, "compare_exchanged": checks.compare_exchanged,
        "held_output": checks.held_output, "release": checks.release,
        "arena": timing.arena, "stage": timing.stage, "time": timing.time, "outputs": timing.outputs,
        "workload": timing.workload, "peaks": timing.peaks,
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
    arena_fd = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    # Candidate prints go to the log the judge captured as stdout/stderr, never to the channel.
    serve(fd_in, fd_out, arena_fd)


if __name__ == "__main__":
    main()
