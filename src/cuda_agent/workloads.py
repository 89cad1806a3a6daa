"""Workloads: one task judged at several shapes, some of which the candidate never saw.

A kernel tuned to the one shape ``get_inputs`` returns (sizes as constants, no bounds checks, a
grid that covers only that size) is not a skill. A KernelBench-format task may declare several
workloads with an optional ``get_workloads()``::

    batch_size, dim = 16, 1024          # the axes: module-level names read when called

    def get_inputs():
        return [torch.randn(batch_size, dim)]

    def get_workloads():
        return [{"name": "small", "axes": {"batch_size": 16}},
                {"name": "wide", "axes": {"batch_size": 64, "dim": 4096}, "atol": 2e-2}]

    VARYING_AXES = ("batch_size",)      # optional: integer axes held-out workloads may set

Each workload is a set of values for the task's module-level names (its axes), which
``get_inputs``, ``get_init_inputs`` and ``Model`` read when they are called; with an optional
``atol``/``rtol`` of its own. The judge checks a solution on every declared workload, and on
held-out ones the candidate never sees: other values of the ``VARYING_AXES`` (other batch sizes,
say), drawn afresh, in secret, for every judgement. It times the declared ones. A task without
``get_workloads`` is judged exactly as before.

A workload is judged as a task of its own (``variant``): the task's source with the workload's
values set at its end, so that every part of the judge (its processes, checks, timing, caches)
works on it unchanged.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, replace
from typing import Any

from . import pysource
from .errors import TaskFormatError
from .task import Task

# Held-out workloads a judgement adds where the task names axes that may vary.
HELD_OUT = 2
# How long reading a task's workloads may take (it imports the task, and torch with it).
READ_TIMEOUT_S = 120.0
VARIANT_KEY = "workload"  # a variant task's metadata holds its workload under this key


@dataclass(frozen=True)
class Workload:
    """One set of values for a task's axes, with the tolerance it is checked to."""

    name: str
    axes: dict[str, Any]
    atol: float | None = None
    rtol: float | None = None
    held_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        values = ", ".join(f"{k}={v!r}" for k, v in self.axes.items())
        return f"{'held-out ' if self.held_out else ''}workload {self.name} ({values or 'the task as written'})"


@dataclass(frozen=True)
class WorkloadPlan:
    """What a task declares: its workloads, the axes held-out ones may vary, and the values the
    task's source gives its axes."""

    workloads: tuple[Workload, ...]
    varying: tuple[str, ...]
    defaults: dict[str, Any]


def declares_workloads(task: Task) -> bool:
    """Whether ``task`` defines ``get_workloads`` (and is not itself one workload of a task)."""
    if VARIANT_KEY in task.metadata:
        return False
    try:
        tree = pysource.parse(task.source, task.origin)
    except SyntaxError:
        return False
    return "get_workloads" in pysource.top_level_names(tree)


_PLANS: dict[str, WorkloadPlan] = {}
_PLANS_LOCK = threading.Lock()

# Run in a process of its own: the task's module-level code runs there, never in the judge's
# process (where it could change torch's state for every later judgement), on no GPU.
_READER = r"""
import json, sys, types
source = sys.stdin.read()
module = types.ModuleType("cuda_agent_task")
exec(compile(source, sys.argv[1], "exec"), module.__dict__)
workloads = module.get_workloads()
varying = getattr(module, "VARYING_AXES", ())
names = set()
for w in workloads if isinstance(workloads, (list, tuple)) else ():
    if isinstance(w, dict) and isinstance(w.get("axes"), dict):
        names.update(w["axes"])
names.update(varying if isinstance(varying, (list, tuple)) else ())
defaults = {n: module.__dict__[n] for n in sorted(names) if n in module.__dict__}
declared = {"workloads": workloads, "varying": list(varying) if isinstance(varying, (list, tuple)) else varying}
try:
    json.dumps(declared)  # strictly: only the module's own values below may fall back to their repr
except (TypeError, ValueError) as exc:
    sys.exit(f"get_workloads() and VARYING_AXES must hold plain values (numbers, strings, bools; a dtype by "
             f"its name, such as \"bfloat16\"): {exc}")
print(json.dumps({**declared, "defaults": defaults}, default=repr))
"""


def read_plan(task: Task) -> WorkloadPlan:
    """The workloads ``task`` declares, read by running its ``get_workloads()`` in a process of
    its own (once per task source); TaskFormatError, naming the task, where they are malformed."""
    with _PLANS_LOCK:
        if task.sha256 in _PLANS:
            return _PLANS[task.sha256]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    try:
        done = subprocess.run([sys.executable, "-c", _READER, task.origin], input=task.source, text=True,
                              capture_output=True, timeout=READ_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise TaskFormatError(f"task {task.origin}: get_workloads() did not return within {READ_TIMEOUT_S:.0f} s")
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no message"]
        raise TaskFormatError(f"task {task.origin}: importing it and calling get_workloads() failed: {tail[0]}")
    if not done.stdout.strip():
        raise TaskFormatError(f"task {task.origin}: get_workloads() was not read: the task's import printed nothing "
                              "and exited")
    plan = parse_plan(json.loads(done.stdout.strip().splitlines()[-1]), task.origin)
    with _PLANS_LOCK:
        _PLANS[task.sha256] = plan
    return plan


def parse_plan(data: dict[str, Any], origin: str) -> WorkloadPlan:
    """A plan from what ``get_workloads()`` and ``VARYING_AXES`` hold, checked."""
    where = f"task {origin}: get_workloads()"
    raw = data.get("workloads")
    if not isinstance(raw, list) or not raw:
        raise TaskFormatError(f"{where} must return a non-empty list of workloads, each a dict with an "
                              "\"axes\" dict (module-level names and their values)")
    workloads, seen = [], set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("axes"), dict):
            raise TaskFormatError(f"{where}[{i}] must be a dict with an \"axes\" dict, e.g. "
                                  "{\"axes\": {\"batch_size\": 32}}")
        unknown = set(item) - {"name", "axes", "atol", "rtol"}
        if unknown:
            raise TaskFormatError(f"{where}[{i}] has unknown keys {sorted(unknown)}: a workload holds name, axes, "
                                  "atol and rtol")
        name = str(item.get("name") or i)
        if name in seen:
            raise TaskFormatError(f"{where}: two workloads are named {name!r}")
        seen.add(name)
        for key in ("atol", "rtol"):
            value = item.get(key)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                      or not math.isfinite(value) or value < 0):
                raise TaskFormatError(f"{where}[{i}][{key!r}] must be a non-negative number, not {value!r}")
        for axis, value in item["axes"].items():
            if not axis.isidentifier():
                raise TaskFormatError(f"{where}[{i}]: axis {axis!r} is not a module-level name")
            if not isinstance(value, (int, float, str, bool)) and value is not None:
                raise TaskFormatError(f"{where}[{i}]: axis {axis!r} = {value!r}: an axis holds a number, a "
                                      "string or a bool")
        workloads.append(Workload(name, dict(item["axes"]), item.get("atol"), item.get("rtol")))
    varying = data.get("varying") or []
    if not isinstance(varying, list) or not all(isinstance(a, str) for a in varying):
        raise TaskFormatError(f"task {origin}: VARYING_AXES must be a tuple of axis names")
    defaults = data.get("defaults") or {}
    # A name the task does not define would set nothing it reads: the workload would be the
    # task as written, judged again under another name.
    unknown = sorted({axis for w in workloads for axis in w.axes} - set(defaults))
    if unknown:
        raise TaskFormatError(f"{where}: {', '.join(map(repr, unknown))} is not a module-level name of the task; "
                              "a workload's axes are names the task defines (and get_inputs reads when called)")
    for axis in varying:
        values = [w.axes.get(axis, defaults.get(axis)) for w in workloads]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise TaskFormatError(f"task {origin}: VARYING_AXES names {axis!r}, which must be a positive integer "
                                  f"module-level name in every workload (found {values})")
    return WorkloadPlan(tuple(workloads), tuple(varying), dict(defaults))


def held_out(plan: WorkloadPlan, rng: random.Random, count: int = HELD_OUT) -> list[Workload]:
    """Up to ``count`` workloads the task did not declare, each unlike the others: a declared
    workload with each varying axis set to another size, drawn from ``rng`` between half the
    smallest declared size and the largest, odd where it can be (a size no tile divides), none
    the task declared; one more than the largest only where every smaller size is declared.
    So a held-out workload needs no more memory than a declared one, or next to none more."""
    if not plan.varying:
        return []
    out: list[Workload] = []
    for _ in range(8 * count):
        if len(out) == count:
            break
        base = rng.choice(plan.workloads)
        axes = dict(base.axes)
        for axis in plan.varying:
            declared = {w.axes.get(axis, plan.defaults.get(axis)) for w in plan.workloads}
            axes[axis] = _other_size(declared, rng)
        if all(axes != w.axes for w in out):
            out.append(Workload(f"held-out-{len(out) + 1}", axes, base.atol, base.rtol, held_out=True))
    return out


def _other_size(declared: set[int], rng: random.Random) -> int:
    low, high = max(1, min(declared) // 2), max(declared)
    for _ in range(64):
        n = rng.randint(low, high)
        if n % 2 == 0 and n + 1 <= high and n + 1 not in declared:
            n += 1
        if n not in declared:
            return n
    return high + 1  # every size in range declared


def judge_runs(task: Task) -> int:
    """How many judgements ``task`` takes: one, or one per declared workload and per held-out
    workload where it declares workloads. A time limit for one judgement (a reward's, say) is
    multiplied by it, so a task of many shapes is not cut short for having them. A task whose
    workloads cannot be read counts one: its judgement fails at once."""
    if not declares_workloads(task):
        return 1
    try:
        plan = read_plan(task)
    except TaskFormatError:
        return 1
    return len(plan.workloads) + (HELD_OUT if plan.varying else 0)


def declare_sizes(sizes: list[int], axis: str = "batch_size", prefix: str = "batch") -> str:
    """Source to append to a task: one declared workload per size of ``axis``, which held-out
    workloads may vary too."""
    listed = ", ".join(python_literal({"name": f"{prefix}{n}", "axes": {axis: n}}) for n in sizes)
    return f"\n\ndef get_workloads():\n    return [{listed}]\n\n\nVARYING_AXES = ({axis!r},)\n"


def variant(task: Task, workload: Workload) -> Task:
    """``task`` at ``workload``: its source with the workload's values set at the end, judged
    as a task of its own."""
    footer = (f"\n\n# The judge's workload {workload.name!r}: these module-level names take these values.\n"
              f"globals().update({python_literal(workload.axes)})\n")
    metadata = {**task.metadata, VARIANT_KEY: workload.to_dict()}
    return replace(task, name=f"{task.name}[{workload.name}]", source=task.source + footer, metadata=metadata)


def python_literal(value: Any) -> str:
    """Python source for a JSON value; infinities and NaN, which have no literal, as
    float("inf") and the like."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    return repr(value)


def tolerance_of(task: Task) -> dict[str, float]:
    """The tolerances a variant's workload sets (``atol``, ``rtol``), none for other tasks."""
    workload = task.metadata.get(VARIANT_KEY) or {}
    return {key: float(workload[key]) for key in ("atol", "rtol") if workload.get(key) is not None}
