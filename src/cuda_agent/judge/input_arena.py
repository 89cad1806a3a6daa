"""Each timed call's inputs, made by a trusted process and handed to the worker that is timed.

Everything in the candidate's interpreter is the attacker's, the task module loaded there
included: inputs it builds itself (``get_inputs`` running there) let it do the call's work while
"preparing" them, outside the timed call. So the candidate builds none of its timed calls'
inputs. A trusted process of its own, the stager, lays the task's inputs out once in an arena
that the timed workers map too (on the cpu backend a memfd the judge creates and hands to each of
them; on cuda a device allocation of the stager's, exported with CUDA IPC). Before each timed
call, and only after the worker has answered its prepare step, the stager writes that call's
inputs there (``stage``) and flushes the cache; the call then reads them through views of the
arena. The reference's calibration calls, timed beside the candidate's, are staged the same way,
so both sides' steps do the same work and both follow another process's use of the device.
Between its prepare step and its call the candidate has nothing to do, and the judge holds its
process's CPU clock to that (``timing.integrity_problem``); in its prepare step it does not know
the next inputs yet, so nothing done there can be the call's work (the step is still timed and
held to the reference's: work a call leaves running after its reply would land there).

Each tensor keeps its dtype, shape and strides (a transposed input stays transposed), unless its
strides overlap (an expanded tensor), which is laid out contiguous. Values that are not tensors
are laid out as they are and must be the same for every call. Inputs this cannot hold (a tensor
inside a container, a tensor subclass, a dtype the channel does not carry, a structure that
changes between calls) are not staged: the candidate then builds its own inputs as before, its
prepare step is held to the reference's, and the verdict says so (``inputs_staged``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .protocol import DTYPE_NAMES, DTYPES

ALIGN = 256  # tensor offsets in the arena: aligned for every dtype and for vector loads


class Unstageable(ValueError):
    """The task's inputs cannot be laid out in an arena (the reason is the message)."""


def _strides(tensor: torch.Tensor) -> list[int]:
    """The tensor's strides where no two elements share memory, else contiguous ones."""
    dims = sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride()) if size > 1)
    reach = 1
    for stride, size in dims:
        if stride < reach:  # this dimension steps onto elements an inner one already covers
            return list(torch.empty(tensor.shape, device="meta").stride())
        reach = stride * size
    return list(tensor.stride())


def _extent(shape: list[int], strides: list[int]) -> int:
    """Elements from the first to one past the last that a strided view reaches."""
    if math.prod(shape) == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))


def layout(inputs: list[Any], device: str) -> tuple[list[list[Any]], int]:
    """Slots for ``inputs`` and the bytes they need. A tensor's slot is ["tensor", dtype name,
    shape, strides, byte offset, requires_grad]; any other value's is ["value", value]."""
    slots: list[list[Any]] = []
    offset = 0
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            if type(value) is not torch.Tensor and type(value) is not torch.nn.Parameter:
                raise Unstageable(f"input {i} is a {type(value).__name__}, not a plain tensor")
            if value.layout is not torch.strided or value.dtype not in DTYPE_NAMES:
                raise Unstageable(f"input {i} is a {value.layout} tensor of {value.dtype}")
            if value.device.type != device:
                raise Unstageable(f"input {i} is on {value.device}, not {device}")
            shape, strides = list(value.shape), _strides(value)
            slots.append(["tensor", DTYPE_NAMES[value.dtype], shape, strides, offset, bool(value.requires_grad)])
            offset += -(-_extent(shape, strides) * value.element_size() // ALIGN) * ALIGN
        elif _plain(value):
            slots.append(["value", value])
        else:
            raise Unstageable(f"input {i} is a {type(value).__name__} holding tensors or other objects")
    return slots, max(offset, ALIGN)


def _plain(value: Any) -> bool:
    """A value the channel carries as it is: numbers, strings, None and lists of them."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    return type(value) in (list, tuple) and all(_plain(v) for v in value)


def views(arena: torch.Tensor, slots: list[list[Any]]) -> list[Any]:
    """The inputs as fresh views of ``arena`` (a uint8 tensor), one per tensor slot."""
    inputs: list[Any] = []
    for slot in slots:
        if slot[0] == "value":
            inputs.append(slot[1])
            continue
        _, name, shape, strides, offset, requires_grad = slot
        dtype = DTYPES[name]
        count = _extent(shape, strides)
        if offset < 0 or offset % ALIGN or offset + count * dtype.itemsize > arena.numel():
            raise Unstageable(f"a tensor of {count} elements at offset {offset} does not fit the arena")
        flat = arena[offset:offset + count * dtype.itemsize].view(dtype)
        view = flat.as_strided(shape, strides)
        inputs.append(view.requires_grad_() if requires_grad else view)
    return inputs


def stage(inputs: list[Any], arena: torch.Tensor, slots: list[list[Any]]) -> None:
    """Write ``inputs`` into the arena's views; raises Unstageable if they are not laid out as
    ``slots`` say (the same kinds, dtypes, shapes and values as the first call's)."""
    if len(inputs) != len(slots):
        raise Unstageable(f"the task gave {len(inputs)} inputs for this call and {len(slots)} for the first")
    for i, (value, slot) in enumerate(zip(inputs, slots)):
        if slot[0] == "value":
            if isinstance(value, torch.Tensor) or value != slot[1]:
                raise Unstageable(f"input {i} is {value!r} in this call and {slot[1]!r} in the first")
            continue
        _, name, shape, _strides_, _offset, _grad = slot
        if not isinstance(value, torch.Tensor) or DTYPE_NAMES.get(value.dtype) != name or list(value.shape) != shape:
            raise Unstageable(f"input {i} changed its dtype or shape between calls")
    with torch.no_grad():
        for value, view in zip(inputs, views(arena, slots)):
            if isinstance(value, torch.Tensor):
                view.copy_(value)


def host_arena(fd: int, nbytes: int) -> tuple[torch.Tensor, Any]:
    """The cpu backend's arena: the memfd ``fd``, mapped shared, as a uint8 tensor (and the
    mapping, which must outlive it). The stager sizes the file first (``worker_main.Timing.arena``)."""
    import mmap

    mapping = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(mapping, dtype=torch.uint8), mapping
