"""SOL-ExecBench problems as tasks.

A SOL-ExecBench problem is a folder holding ``definition.json`` and ``workload.jsonl``.

The definition names the problem's ``axes`` (``const`` with a ``value``, ``var``, or ``expr``
with an ``expression`` over other axes), its ``inputs`` and ``outputs`` (each a ``shape`` written
in axis names, or null for a Python scalar, and a ``dtype``), optional ``constraints`` between
axes, an optional ``custom_inputs_entrypoint`` (a function of the reference that makes inputs)
and the PyTorch ``reference``: Python source whose ``run`` takes the inputs in the definition's
order and returns the outputs. Each line of ``workload.jsonl`` is one workload: its ``uuid``, the
values of the ``var`` axes (``axes``), how each input is made (``inputs``: ``random``, ``scalar``
with a ``value``, ``safetensors`` or ``custom``) and an optional ``tolerance``.

``load_problem`` turns a problem folder into a KernelBench-format task that declares workloads
(see ``cuda_agent.workloads``): the reference as it is, a module-level name for every axis and
every scalar input (holding the first workload's values), ``Model`` calling ``run``,
``get_inputs()`` building every input from the axes' values when it is called, ``get_workloads()``
listing the workloads and ``VARYING_AXES`` naming the ``var`` axes other sizes may be tried for.
What the reader cannot do as SOL-ExecBench does (inputs read from safetensors files, packed 4-bit
dtypes, constraints it cannot evaluate) is a TaskFormatError that says what to do instead.

``solution_from_json`` turns a SOL-ExecBench solution (its JSON: ``spec`` and ``sources``) into a
single-file solution of KernelBench's format, ``model_new.py``: C++ languages (``cuda_cpp``,
``cutlass``, ``cudnn``, ``cublas``, torch binding) build their files with ``load_inline`` at import;
Python languages are carried as their one module's source. ``ModelNew.forward`` calls the entry
point, allocating the outputs first where the solution takes them as destinations. The judge's
own rules then decide what it accepts; the conversion refuses only what it cannot express.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import operator
import posixpath
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import TaskFormatError
from .task import Task, natural_key, task_from_source
from .workloads import python_literal

SOURCE_FORMAT = "sol-execbench"
DEFINITION_FILE = "definition.json"
WORKLOADS_FILE = "workload.jsonl"
ENTRY_POINT = "run"  # the reference's function the model calls

# SOL-ExecBench's dtypes that torch has, by name.
TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                "int64", "int32", "int16", "int8", "bool")
# 4-bit floats: SOL-ExecBench packs two values a byte, so the tensor is not of the shape written.
PACKED_DTYPES = ("float4_e2m1", "float4_e2m1fn_x2")
FLOAT8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
# The ranges SOL-ExecBench draws random integers from, [low, high).
INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024), "int64": (-1024, 1024)}
DEFAULT_TOLERANCE = 1e-2  # a workload's max_atol and max_rtol where its tolerance leaves them out

# Names the generated module defines itself; an axis, a scalar input or the reference may not
# take them (and the reference may not define the scaffolding's names either).
SCAFFOLDING = ("Model", "get_inputs", "get_init_inputs", "get_workloads", "VARYING_AXES")
PRIVATE_PREFIX = "_sol_"

_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
               ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
               ast.Pow: operator.pow}
_COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


def is_problem(path: Path) -> bool:
    """Whether ``path`` is a SOL-ExecBench problem folder (it holds a definition.json)."""
    return path.is_dir() and (path / DEFINITION_FILE).is_file()


def problem_folders(path: Path) -> list[Path]:
    """The problem folders directly inside ``path``, in natural order."""
    return sorted((p for p in path.iterdir() if is_problem(p)), key=natural_key)


def load_problem(folder: Path) -> Task:
    """The task of the SOL-ExecBench problem in ``folder``, named after the folder."""
    folder = Path(folder)
    problem = _Problem(folder)
    problem.read()
    return task_from_source(problem.source(), folder.name, str(folder), problem.metadata())


# ---------------------------------------------------------------------------------------------


class _Unsupported(Exception):
    """An expression outside the arithmetic (and comparisons) over axes the reader evaluates."""


def _evaluate(node: ast.AST, values: dict[str, Any], logic: bool = False) -> Any:
    """``node`` evaluated over ``values``: numbers, axis names, + - * / // % ** and unary signs;
    with ``logic``, comparisons, ``and``, ``or`` and ``not`` too."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values, logic)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise _Unsupported(f"{node.id!r} is not an axis")
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left, values, logic), _evaluate(node.right, values, logic)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise _Unsupported(f"the power {ast.unparse(node)!r} is too large")
        return _ARITHMETIC[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand, values, logic)
        return value if isinstance(node.op, ast.UAdd) else -value
    if logic and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, values, logic)
    if logic and isinstance(node, ast.Compare) and all(type(op) in _COMPARISONS for op in node.ops):
        left = _evaluate(node.left, values, logic)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, values, logic)
            if not _COMPARISONS[type(op)](left, right):
                return False
            left = right
        return True
    if logic and isinstance(node, ast.BoolOp):
        results = (_evaluate(v, values, logic) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    raise _Unsupported(f"{ast.unparse(node)!r} is not arithmetic over axes")


def _names(tree: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _grows_with_its_axes(tree: ast.AST) -> bool:
    """Whether an expression only adds and multiplies axes and non-negative whole numbers: one
    that stays a valid size whatever positive sizes its axes take."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Name, ast.Load, ast.Add, ast.Mult)):
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
            continue
        return False
    return True


def _whole(value: Any) -> int | None:
    """An expression axis's value as SOL-ExecBench takes it: a whole number, or None."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if type(value) is int else None


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module binds at its top level (through if/try/with/for blocks too, and
    ``global`` statements in its functions)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    targets(target)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            for attr in ("body", "orelse", "finalbody"):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(getattr(node, attr, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                if handler.name:
                    names.add(handler.name)
                visit(handler.body)

    visit(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
    return names


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


# How SOL-ExecBench fills a floating-point input it makes at random: by the input's name (and
# description), layer-norm weights and biases, masks, rotary tables, positive statistics, SSM
# decays, softmax outputs and weight matrices get values of their kind; any other, normal values.
_MASKS = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_MASK_WORDS = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
_COS, _SIN = ("cos", "cos_cached", "rope_cos"), ("sin", "sin_cached", "rope_sin")
_POSITIVE = ("rstd", "std", "variance", "var")
_DECAYS = {"A_log": (-5.0, -1.0), "A": (-1.0, -0.001), "g": (-5.0, 0.0)}
_SOFTMAXES = ("attn_weights", "attention_weights", "routing_weights")
_WEIGHT_ENDINGS = ("_weight", "_weights", "_proj", "_projs", "_weight_matrix")


def _norm_parameter(name: str, kind: str) -> bool:
    if name == f"norm_{kind}":
        return True
    return name.endswith(f"_{kind}") and name[: -len(kind) - 1].rstrip("0123456789").endswith("norm")


def float_init(name: str, rank: int, description: str | None, op_type: str | None) -> tuple[str, ...]:
    """How a random floating-point input named ``name`` of ``rank`` dimensions is filled: a kind
    (``normal``, ``ones``, ``zeros``, ``causal_mask``, ``binary_mask``, ``cos``, ``sin``,
    ``positive``, ``uniform``, ``decay_cumsum``, ``softmax``, ``fan_in``) and its arguments; a
    ``softmax_probs`` kind last where a sampling problem's ``probs`` is normalised."""
    text = (description or "").lower()
    base = name.rstrip("0123456789")
    if _norm_parameter(name, "weight"):
        kind: tuple[str, ...] = ("ones",)
    elif _norm_parameter(name, "bias"):
        kind = ("zeros",)
    elif rank >= 2 and (name in ("attention_mask", "causal_mask")
                        or ("attention mask" in text and "causal" in text)):
        binary = name in _MASKS or (name.endswith("_mask") and any(w in text for w in _MASK_WORDS))
        kind = ("causal_mask", "binary" if binary else "normal")
    elif name in _MASKS or (name.endswith("_mask") and any(w in text for w in _MASK_WORDS)):
        kind = ("binary_mask",)
    elif name in _COS:
        kind = ("cos",)
    elif name in _SIN:
        kind = ("sin",)
    elif base in _POSITIVE or base.endswith(tuple(f"_{p}" for p in _POSITIVE)):
        kind = ("positive",)
    elif name == "A_cumsum":
        kind = ("decay_cumsum",)
    elif name in _DECAYS:
        kind = ("uniform", *map(repr, _DECAYS[name]))
    elif name in _SOFTMAXES or ("softmax" in text and "output" in text):
        kind = ("softmax",)
    elif rank >= 2 and (base == "weight" or name.endswith(_WEIGHT_ENDINGS) or base.endswith(_WEIGHT_ENDINGS)):
        kind = ("fan_in",)
    else:
        kind = ("normal",)
    if op_type == "sampling" and name == "probs":
        kind = (*kind, "softmax_probs")
    return kind


def _float_source(kind: tuple[str, ...], shape: str, last: str | None, dtype: str) -> str:
    """Python source making a floating tensor of ``kind`` (see ``float_init``)."""
    what = kind[0]
    if what == "ones":
        src = f"torch.ones({shape}, dtype={dtype})"
    elif what == "zeros":
        src = f"torch.zeros({shape}, dtype={dtype})"
    elif what == "causal_mask":
        src = f"_sol_causal_mask({shape}, {dtype}, {kind[1] == 'binary'})"
    elif what == "binary_mask":
        src = f"torch.randint(0, 2, {shape}).to({dtype})"
    elif what in ("cos", "sin"):
        src = f"torch.{what}(torch.randn({shape}).clamp(-math.pi, math.pi)).to({dtype})"
    elif what == "positive":
        src = f"torch.randn({shape}, dtype={dtype}).abs() + 0.1"
    elif what == "uniform":
        src = f"torch.empty({shape}, dtype={dtype}).uniform_({kind[1]}, {kind[2]})"
    elif what == "decay_cumsum":
        src = f"torch.empty({shape}, dtype={dtype}).uniform_(-0.1, 0.0).cumsum(-1)"
    elif what == "softmax":
        src = f"torch.softmax(torch.randn({shape}), dim=-1).to({dtype})"
    elif what == "fan_in":
        src = f"torch.randn({shape}, dtype={dtype}) / {last} ** 0.5"
    else:
        src = f"torch.randn({shape}, dtype={dtype})"
    if kind[-1] == "softmax_probs":
        src = f"torch.softmax({src}, dim=-1)"
    return src


_CAUSAL_MASK_HELPER = '''
def _sol_causal_mask(shape, dtype, binary):
    """An additive causal mask (0 on and below the diagonal, the dtype's lowest value above)
    where the last two sizes are equal; otherwise 0/1 values (binary) or normal ones."""
    if shape[-1] == shape[-2]:
        mask = torch.zeros(shape, dtype=dtype)
        mask[..., torch.ones(shape[-1], shape[-1]).triu(1).bool()] = torch.finfo(dtype).min
        return mask
    if binary:
        return torch.randint(0, 2, shape).to(dtype)
    return torch.randn(shape, dtype=dtype)
'''

_WHOLE_HELPER = '''
def _sol_whole(axis, value):
    """An expression axis's value, which must be a whole number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int):
        raise ValueError(f"axis {axis} = {value!r} is not a whole number")
    return value
'''

_OUTPUTS_HELPER = '''
def _sol_outputs(result):
    """run's result as the model's output: outputs returned by name, in the definition's order."""
    if isinstance(result, dict):
        values = tuple(result[name] for name in _SOL_OUTPUT_NAMES)
        return values[0] if len(values) == 1 else values
    return result
'''


@dataclass
class _Tensor:
    name: str
    shape: list[str] | None  # axis names or whole numbers as text; None: a Python scalar
    dtype: str
    description: str | None = None


@dataclass
class _Workload:
    uuid: str
    axes: dict[str, int]                  # the var axes
    resolved: dict[str, Any]              # every axis, expressions worked out
    scalars: dict[str, Any]               # scalar inputs' values
    tolerance: dict[str, Any] | None


@dataclass
class _Problem:
    folder: Path
    definition: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, dict[str, Any]] = field(default_factory=dict)
    expressions: dict[str, ast.Expression] = field(default_factory=dict)
    inputs: list[_Tensor] = field(default_factory=list)
    outputs: list[_Tensor] = field(default_factory=list)
    reference: str = ""
    future: list[str] = field(default_factory=list)   # the reference's __future__ imports
    reference_names: set[str] = field(default_factory=set)
    reference_tree: ast.Module = field(default_factory=lambda: ast.Module([], []))
    constraints: list[tuple[str, ast.Expression]] = field(default_factory=list)
    entrypoint: str | None = None
    workloads: list[_Workload] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # input -> random, scalar or custom
    varying: list[str] = field(default_factory=list)
    fixed: dict[str, str] = field(default_factory=dict)   # var axis not varied -> why

    # -- errors -------------------------------------------------------------------------------

    def error(self, where: str, what: str, todo: str) -> TaskFormatError:
        return TaskFormatError(f"SOL-ExecBench problem {self.folder}: {where}: {what}. {todo}")

    def definition_error(self, where: str, what: str) -> TaskFormatError:
        return self.error(f"{DEFINITION_FILE} {where}", what,
                          "Fix definition.json to follow SOL-ExecBench's definition schema.")

    # -- reading ------------------------------------------------------------------------------

    def read(self) -> None:
        self.read_definition()
        self.read_workloads()
        self.check_constraints()
        self.choose_varying()

    def read_definition(self) -> None:
        """definition.json alone: what a solution's conversion needs."""
        path = self.folder / DEFINITION_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error(DEFINITION_FILE, f"cannot be read as JSON ({exc})",
                             "A problem folder holds definition.json and workload.jsonl.") from None
        if not isinstance(data, dict):
            raise self.error(DEFINITION_FILE, "must be a JSON object",
                             "Fix definition.json to follow SOL-ExecBench's definition schema.")
        self.definition = data
        for key in ("name", "axes", "inputs", "outputs", "reference"):
            if key not in data:
                raise self.definition_error(f'"{key}"', "is missing")
        if not isinstance(data["name"], str) or not data["name"]:
            raise self.definition_error('"name"', "must be a non-empty string")
        self.read_reference()
        self.read_axes()
        self.inputs = self.read_tensors("inputs")
        self.outputs = self.read_tensors("outputs")
        self.check_entry_point()
        self.read_entrypoint()
        self.read_constraints()

    def read_reference(self) -> None:
        source = self.definition["reference"]
        if not isinstance(source, str) or not source.strip():
            raise self.definition_error('"reference"', "must be Python source")
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise self.definition_error('"reference"', f"is not valid Python ({exc.msg}, line {exc.lineno})")
        lines = source.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                self.future.append(ast.unparse(node))
                for i in range(node.lineno - 1, node.end_lineno):
                    lines[i] = ""
        self.reference = "\n".join(lines).strip("\n") if self.future else source.strip("\n")
        self.reference_names = _bound_names(tree)
        clash = sorted(n for n in self.reference_names if n in SCAFFOLDING or n.startswith(PRIVATE_PREFIX))
        if clash:
            raise self.error(f'{DEFINITION_FILE} "reference"', f"defines {', '.join(clash)} at module level, which "
                             "the task built around it defines itself",
                             "Rename them in the reference, or write the task by hand.")
        self.reference_tree = tree

    def check_name(self, kind: str, name: str) -> None:
        """An axis or a scalar input: a module-level name of the task."""
        if not name.isidentifier() or keyword.iskeyword(name):
            raise self.definition_error(f"{kind} {name!r}", "is not a Python name")
        if name in SCAFFOLDING or name in ("torch", "nn", "math") or name.startswith(PRIVATE_PREFIX):
            raise self.error(f"{DEFINITION_FILE} {kind} {name!r}", "takes a name the task needs for itself",
                             "Rename it in definition.json, workload.jsonl and the reference.")
        if kind == "scalar input" and name in self.axes:
            raise self.definition_error(f"{kind} {name!r}", "is also an axis")
        if name in self.reference_names:
            raise self.error(f"{DEFINITION_FILE} {kind} {name!r}",
                             "is also a module-level name of the reference, and the task makes every axis "
                             "and scalar input a module-level name", "Rename one of them.")

    def read_axes(self) -> None:
        axes = self.definition["axes"]
        if not isinstance(axes, dict):
            raise self.definition_error('"axes"', "must be an object of axis names")
        for name, spec in axes.items():
            self.check_name("axis", name)
            if not isinstance(spec, dict) or spec.get("type") not in ("const", "var", "expr"):
                raise self.definition_error(f'"axes".{name}', 'must be {"type": "const"|"var"|"expr", ...}')
            if spec["type"] == "const":
                value = spec.get("value")
                if type(value) is not int or value < 0:
                    raise self.definition_error(f'"axes".{name}.value',
                                                f"must be a non-negative integer, not {value!r}")
            elif spec["type"] == "expr":
                text = spec.get("expression")
                if not isinstance(text, str) or not text.strip():
                    raise self.definition_error(f'"axes".{name}.expression', "must be an arithmetic expression")
                try:
                    tree = ast.parse(text.strip(), mode="eval")
                except SyntaxError:
                    raise self.definition_error(f'"axes".{name}.expression', f"{text!r} is not an expression")
                known = [n for n in axes if n != name and (axes[n].get("type") != "expr" or n in self.expressions)]
                try:
                    _evaluate(tree, {n: 1 for n in known})
                except _Unsupported as exc:
                    raise self.error(f'{DEFINITION_FILE} "axes".{name}.expression', f"{text!r}: {exc}",
                                     "An expression axis may use numbers, +, -, *, /, //, %, ** and the names "
                                     "of axes defined before it.") from None
                except (ZeroDivisionError, OverflowError, TypeError):
                    pass  # checked with each workload's values
                self.expressions[name] = tree
            self.axes[name] = spec

    def read_tensors(self, kind: str) -> list[_Tensor]:
        specs = self.definition[kind]
        if not isinstance(specs, dict):
            raise self.definition_error(f'"{kind}"', "must be an object of tensor names")
        tensors = []
        for name, spec in specs.items():
            where = f'"{kind}".{name}'
            if not isinstance(spec, dict) or "dtype" not in spec or "shape" not in spec:
                raise self.definition_error(where, 'must be {"shape": [...] or null, "dtype": ...}')
            if kind == "inputs" and (not name.isidentifier() or keyword.iskeyword(name) or name == "self"):
                raise self.definition_error(where, "is not a name run() can take")
            if kind == "inputs" and (name == ENTRY_POINT or name.startswith(PRIVATE_PREFIX)):
                raise self.error(f"{DEFINITION_FILE} {where}", "takes a name the task needs for itself",
                                 "Rename the input in definition.json, workload.jsonl and the reference.")
            shape, dtype = spec["shape"], spec["dtype"]
            if shape is not None:
                if not isinstance(shape, list) or not all(isinstance(a, str) and a for a in shape):
                    raise self.definition_error(f"{where}.shape", "must be a list of axis names, or null")
                for axis in shape:
                    if not axis.isdigit() and axis not in self.axes:
                        raise self.definition_error(f"{where}.shape", f"names {axis!r}, which is not an axis")
            if dtype in PACKED_DTYPES:
                raise self.error(f"{DEFINITION_FILE} {where}.dtype", f"{dtype} is a packed 4-bit float (two values a "
                                 "byte) that torch has no tensors of in the shape written",
                                 "Such problems cannot be read; write the task by hand with uint8 storage.")
            if dtype not in TORCH_DTYPES:
                raise self.definition_error(f"{where}.dtype", f"{dtype!r} is not a SOL-ExecBench dtype "
                                            f"(one of {', '.join(TORCH_DTYPES + PACKED_DTYPES)})")
            if dtype in FLOAT8_DTYPES:
                self.check_torch_has(dtype, where)
            description = spec.get("description")
            tensors.append(_Tensor(name, shape, dtype, description if isinstance(description, str) else None))
        return tensors

    def check_torch_has(self, dtype: str, where: str) -> None:
        try:
            import torch
        except ImportError:
            return
        if not hasattr(torch, dtype):
            raise self.error(f"{DEFINITION_FILE} {where}.dtype", f"torch {torch.__version__} has no {dtype}",
                             "Install a torch that has it.")

    def check_entry_point(self) -> None:
        run = next((n for n in self.reference_tree.body
                    if isinstance(n, ast.FunctionDef) and n.name == ENTRY_POINT), None)
        if run is None:
            raise self.error(f'{DEFINITION_FILE} "reference"', f"defines no top-level {ENTRY_POINT}() function",
                             f"SOL-ExecBench's reference defines {ENTRY_POINT}(<inputs>) returning the outputs.")
        params = [a.arg for a in run.args.posonlyargs + run.args.args]
        names = [t.name for t in self.inputs]
        if params != names:
            raise self.error(f'{DEFINITION_FILE} "reference"', f"{ENTRY_POINT}() takes {params}, but \"inputs\" "
                             f"names {names}", f"{ENTRY_POINT}()'s parameters must be the inputs, in order.")

    def read_entrypoint(self) -> None:
        name = self.definition.get("custom_inputs_entrypoint")
        if name is None:
            return
        defined = any(isinstance(n, ast.FunctionDef) and n.name == name for n in self.reference_tree.body)
        if not isinstance(name, str) or not defined:
            raise self.error(f'{DEFINITION_FILE} "custom_inputs_entrypoint"',
                             f"{name!r} is not a top-level function of the reference",
                             "Name the reference's function that makes the custom inputs, or set it to null.")
        self.entrypoint = name

    def read_constraints(self) -> None:
        constraints = self.definition.get("constraints") or []
        if not isinstance(constraints, list):
            raise self.definition_error('"constraints"', "must be a list of expressions")
        for i, text in enumerate(constraints):
            where = f'{DEFINITION_FILE} "constraints"[{i}]'
            todo = ("The reader evaluates constraints written in axis names, numbers, arithmetic, comparisons, "
                    "and, or and not. Remove this one from definition.json if the workloads and the reference "
                    "keep it anyway (the reference may assert it), or write the task by hand.")
            try:
                tree = ast.parse(str(text).strip(), mode="eval")
            except SyntaxError:
                raise self.error(where, f"{text!r} is not an expression", todo) from None
            try:
                _evaluate(tree, {n: 1 for n in self.axes}, logic=True)
            except _Unsupported as exc:
                raise self.error(where, f"cannot be evaluated: {exc}", todo) from None
            except (ZeroDivisionError, OverflowError, TypeError):
                pass  # checked with each workload's values
            self.constraints.append((str(text), tree))

    def read_workloads(self) -> None:
        path = self.folder / WORKLOADS_FILE
        if not path.is_file():
            raise self.error(WORKLOADS_FILE, "is missing", "A problem folder holds definition.json and workload.jsonl.")
        kinds: dict[str, dict[str, str]] = {t.name: {} for t in self.inputs}  # input -> kind -> a uuid
        seen: set[str] = set()
        with path.open() as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{WORKLOADS_FILE}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise self.error(where, f"is not valid JSON ({exc.msg})",
                                     "Each line is one workload object.") from None
                workload = self.read_workload(row, where, kinds)
                if workload.uuid in seen:
                    raise self.error(where, f"uuid {workload.uuid!r} is used twice", "Give each workload its own uuid.")
                seen.add(workload.uuid)
                self.workloads.append(workload)
        if not self.workloads:
            raise self.error(WORKLOADS_FILE, "holds no workloads", "Add one workload a line.")
        for name, found in kinds.items():
            if len(found) > 1:
                how = ", ".join(f"{kind} in workload {uuid}" for kind, uuid in found.items())
                raise self.error(f"{WORKLOADS_FILE} inputs.{name}", f"is made in different ways ({how})",
                                 "The reader makes an input one way in every workload; split the workloads "
                                 "into problems of their own.")
            self.sources[name] = next(iter(found), "random")

    def read_workload(self, row: Any, where: str, kinds: dict[str, dict[str, str]]) -> _Workload:
        if not isinstance(row, dict):
            raise self.error(where, "must be a JSON object", "Each line is one workload object.")
        uuid = row.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise self.error(f"{where} uuid", "is missing", "Each workload has a non-empty uuid.")
        where = f"{WORKLOADS_FILE} workload {uuid}"
        axes = row.get("axes")
        if not isinstance(axes, dict):
            raise self.error(f"{where} axes", "must be an object of var axis values", 'E.g. "axes": {"M": 128}.')
        var_axes = {}
        for name, value in axes.items():
            spec = self.axes.get(name)
            if type(value) is not int or value < 0:
                raise self.error(f"{where} axes.{name}", f"must be a non-negative integer, not {value!r}",
                                 "Give each var axis its size.")
            if spec is None or spec["type"] == "expr" or (spec["type"] == "const" and spec["value"] != value):
                raise self.error(f"{where} axes.{name}", "is not a var axis of the definition",
                                 "A workload gives values to the definition's var axes only.")
            if spec["type"] == "var":
                var_axes[name] = value
        missing = [n for n, s in self.axes.items() if s["type"] == "var" and n not in var_axes]
        if missing:
            raise self.error(f"{where} axes", f"gives no value to the var axes {', '.join(missing)}",
                             "Give every var axis a value in every workload.")
        scalars = self.read_workload_inputs(row.get("inputs", {}), where, uuid, kinds)
        tolerance = row.get("tolerance")
        if tolerance is not None:
            if not isinstance(tolerance, dict):
                raise self.error(f"{where} tolerance", "must be an object", 'E.g. "tolerance": {"max_atol": 1e-3}.')
            for key in ("max_atol", "max_rtol"):
                value = tolerance.get(key, DEFAULT_TOLERANCE)
                if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                    raise self.error(f"{where} tolerance.{key}", f"must be a non-negative number, not {value!r}",
                                     "Fix the tolerance.")
        resolved = {n: s["value"] for n, s in self.axes.items() if s["type"] == "const"}
        resolved.update(var_axes)
        for name, tree in self.expressions.items():
            text = self.axes[name]["expression"]
            try:
                value = _whole(_evaluate(tree, resolved))
            except (ZeroDivisionError, OverflowError, TypeError, _Unsupported) as exc:
                raise self.error(f'{DEFINITION_FILE} "axes".{name}.expression', f"{text!r} fails for workload "
                                 f"{uuid} ({exc})", "Fix the expression or the workload.") from None
            if value is None:
                raise self.error(f'{DEFINITION_FILE} "axes".{name}.expression', f"{text!r} is not a whole number "
                                 f"for workload {uuid}", "Fix the expression or the workload.")
            resolved[name] = value
        return _Workload(uuid, var_axes, resolved, scalars, tolerance)

    def read_workload_inputs(self, inputs: Any, where: str, uuid: str,
                             kinds: dict[str, dict[str, str]]) -> dict[str, Any]:
        if not isinstance(inputs, dict):
            raise self.error(f"{where} inputs", "must be an object of input names",
                             'E.g. "inputs": {"A": {"type": "random"}}.')
        by_name = {t.name: t for t in self.inputs}
        unknown = sorted(set(inputs) - set(by_name))
        if unknown:
            raise self.error(f"{where} inputs", f"names {', '.join(unknown)}, which the definition's inputs do not",
                             "Name the definition's inputs only.")
        scalars = {}
        for tensor in self.inputs:
            spec = inputs.get(tensor.name, {"type": "random"})
            kind = spec.get("type") if isinstance(spec, dict) else None
            here = f"{where} inputs.{tensor.name}"
            if kind == "safetensors":
                raise self.error(here, f"is read from the safetensors file {spec.get('path')!r} (key "
                                 f"{spec.get('tensor_key')!r}), which the reader does not load",
                                 "Remove the workloads that read safetensors files from workload.jsonl to load the "
                                 "others, or write the task by hand.")
            if kind == "custom" and self.entrypoint is None:
                raise self.error(here, "is a custom input, but the definition names no custom_inputs_entrypoint",
                                 "Set custom_inputs_entrypoint in definition.json to the reference's function that "
                                 "makes the inputs.")
            if kind == "scalar":
                value = spec.get("value")
                if type(value) not in (int, float, bool):
                    raise self.error(f"{here}.value", f"must be an int, a float or a bool, not {value!r}",
                                     "Give the scalar's value.")
                if tensor.shape is not None:
                    raise self.error(here, "is a scalar, but the definition gives it a shape",
                                     'Give it "shape": null in definition.json, or make it random.')
                self.check_name("scalar input", tensor.name)
                scalars[tensor.name] = value
            elif kind not in ("random", "custom"):
                raise self.error(f"{here}.type", f"{kind!r} is not an input type",
                                 "An input is random, scalar, safetensors or custom.")
            kinds[tensor.name].setdefault(kind, uuid)
        return scalars

    def check_constraints(self) -> None:
        for text, tree in self.constraints:
            for w in self.workloads:
                try:
                    holds = _evaluate(tree, w.resolved, logic=True)
                except (ZeroDivisionError, OverflowError, TypeError) as exc:
                    holds, why = False, f" ({exc})"
                else:
                    why = ""
                if not holds:
                    raise self.error(f"{WORKLOADS_FILE} workload {w.uuid}", f"breaks the constraint {text!r}{why}",
                                     "Fix the workload's axes.")

    def choose_varying(self) -> None:
        """The var axes other sizes may be tried for: each only where every size of it is valid
        as far as the definition tells, so a var axis is kept fixed when a constraint names it,
        an expression axis uses it in other ways than adding and multiplying, no input's shape
        depends on it, or a workload gives it 0."""
        depends: dict[str, set[str]] = {}   # axis -> the var axes it depends on
        loose: set[str] = set()             # var axes an expression uses in other ways
        for name, spec in self.axes.items():
            if spec["type"] == "var":
                depends[name] = {name}
            elif spec["type"] == "const":
                depends[name] = set()
            else:
                tree = self.expressions[name]
                depends[name] = set().union(*(depends.get(n, set()) for n in _names(tree)))
                if not _grows_with_its_axes(tree):
                    loose |= depends[name]
        constrained = set().union(*(depends.get(n, set()) for _, tree in self.constraints for n in _names(tree)))
        shaped = set().union(*(depends[a] for t in self.inputs for a in t.shape or [] if not a.isdigit()))
        for name, spec in self.axes.items():
            if spec["type"] != "var":
                continue
            if name in constrained:
                self.fixed[name] = "a constraint names it"
            elif name in loose:
                self.fixed[name] = "an expression axis uses it in other ways than adding and multiplying"
            elif name not in shaped and self.entrypoint is None:
                self.fixed[name] = "no input's shape depends on it"
            elif any(w.axes[name] <= 0 for w in self.workloads):
                self.fixed[name] = "a workload gives it 0"
            else:
                self.varying.append(name)

    # -- the task -----------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        d = self.definition
        tensor = lambda t: {"shape": t.shape, "dtype": t.dtype}  # noqa: E731
        return {
            "source_format": SOURCE_FORMAT,
            "name": d["name"],
            "description": d.get("description"),
            "op_type": d.get("op_type"),
            "hf_id": d.get("hf_id"),
            "axes": {n: dict(s) for n, s in self.axes.items()},
            "constraints": [text for text, _ in self.constraints],
            "inputs": {t.name: tensor(t) for t in self.inputs},
            "outputs": {t.name: tensor(t) for t in self.outputs},
            "input_sources": dict(self.sources),
            "custom_inputs_entrypoint": self.entrypoint,
            "tolerances": {w.uuid: w.tolerance for w in self.workloads if w.tolerance is not None},
            "varying_axes": list(self.varying),
            "fixed_var_axes": dict(self.fixed),
        }

    def globals_(self) -> list[str]:
        """The module-level names the workloads set: the var axes and the scalar inputs."""
        return [n for n, s in self.axes.items() if s["type"] == "var"] + \
            [t.name for t in self.inputs if self.sources[t.name] == "scalar"]

    def source(self) -> str:
        d, first = self.definition, self.workloads[0]
        title = f"{d['name']} ({d['op_type']})" if isinstance(d.get("op_type"), str) else d["name"]
        head = [f"# SOL-ExecBench problem {' '.join(title.split())}."]
        for para in str(d.get("description") or "").splitlines():
            head += ["# " + line for line in textwrap.wrap(para, 96)] or ["#"]
        head += ["#", "# Model runs the reference's run(); get_inputs() builds the inputs from the axes' values at",
                 "# the time of the call; get_workloads() lists the problem's workloads (workload.jsonl)."]
        kinds = [self.init_kind(t)[0] for t in self.inputs if self.sources[t.name] == "random" and t.shape is not None
                 and t.dtype not in FLOAT8_DTYPES + tuple(INT_RANGES) + ("bool",)]
        imports = ["import math", ""] if {"cos", "sin"} & set(kinds) else []
        imports += ["import torch", "import torch.nn as nn"]
        parts = ["\n".join(head), "\n".join(self.future + imports)]
        parts.append("# The reference (definition.json \"reference\").\n" + self.reference)

        lines = ["# Axes (definition.json \"axes\") and scalar inputs. The var axes and the scalar inputs hold",
                 "# the first workload's values; each workload sets them before the inputs are built."]
        for name, spec in self.axes.items():
            if spec["type"] == "const":
                lines.append(f"{name} = {spec['value']!r}  # const")
            elif spec["type"] == "var":
                note = f": {spec['description']}" if isinstance(spec.get("description"), str) else ""
                lines.append(f"{name} = {first.axes[name]!r}  # var{note}".replace("\n", " "))
        for tensor in self.inputs:
            if self.sources[tensor.name] == "scalar":
                lines.append(f"{tensor.name} = {python_literal(first.scalars[tensor.name])}  # scalar input")
        lines += ["", f"VARYING_AXES = {tuple(self.varying)!r}"]
        parts.append("\n".join(lines))

        helpers = [self.axes_function()]
        if self.expressions:
            helpers.append(_WHOLE_HELPER.strip())
        if "causal_mask" in kinds:
            helpers.append(_CAUSAL_MASK_HELPER.strip())
        helpers.append(f"_SOL_OUTPUT_NAMES = {tuple(t.name for t in self.outputs)!r}\n\n\n" + _OUTPUTS_HELPER.strip())
        parts += helpers

        params = ", ".join(t.name for t in self.inputs)
        parts.append(
            "class Model(nn.Module):\n"
            f'    """The reference\'s {ENTRY_POINT}({params}), returning its outputs in the definition\'s '
            'order."""\n\n'
            "    def __init__(self):\n"
            "        super().__init__()\n\n"
            f"    def forward(self{', ' if params else ''}{params}):\n"
            f"        return _sol_outputs({ENTRY_POINT}({params}))")
        parts.append(self.get_inputs_function())
        parts.append("def get_init_inputs():\n    return []")
        parts.append(self.get_workloads_function())
        return "\n\n\n".join(parts) + "\n"

    def axes_function(self) -> str:
        plain = [n for n, s in self.axes.items() if s["type"] != "expr"]
        values = "{" + ", ".join(f"{n!r}: {n}" for n in plain) + "}"
        doc = '    """Every axis\'s value now'
        if not self.expressions:
            return f'def _sol_axes():\n{doc}."""\n    return {values}'
        body = [f"def _sol_axes():\n{doc}, the expression axes worked out from the others.\"\"\"",
                f"    _sol_v = {values}"]

        class Lookup(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                return ast.Subscript(ast.Name("_sol_v", ast.Load()), ast.Constant(node.id), ast.Load())

        for name, tree in self.expressions.items():
            expr = ast.unparse(Lookup().visit(ast.parse(ast.unparse(tree), mode="eval")))
            body.append(f"    _sol_v[{name!r}] = _sol_whole({name!r}, {expr})")
        return "\n".join(body + ["    return _sol_v"])

    def init_kind(self, tensor: _Tensor) -> tuple[str, ...]:
        return float_init(tensor.name, len(tensor.shape or []), tensor.description, self.definition.get("op_type"))

    def get_inputs_function(self) -> str:
        taken = set(self.globals_()) | {self.entrypoint or ""}
        dims, custom = _fresh("dims", taken), _fresh("custom", taken)
        body = [f"    {dims} = _sol_axes()"]
        if any(kind == "custom" for kind in self.sources.values()):
            scalars = "".join(f", {n!r}: {n}" for n in self.globals_() if n not in self.axes)
            body.append(f"    {custom} = {self.entrypoint}({{**{dims}{scalars}}}, torch.empty(0).device)")
        items = [self.input_source(t, dims, custom) for t in self.inputs]
        body.append("    return [" + "".join(f"\n        {item}," for item in items) + ("\n    ]" if items else "]"))
        return "def get_inputs():\n" + "\n".join(body)

    def input_source(self, tensor: _Tensor, dims: str, custom: str) -> str:
        how = self.sources[tensor.name]
        if how == "scalar":
            return tensor.name
        if how == "custom":
            return f"{custom}[{tensor.name!r}]"
        dtype = f"torch.{tensor.dtype}"
        if tensor.shape is None:  # a random Python scalar
            if tensor.dtype == "bool":
                return "bool(torch.randint(0, 2, ()).item())"
            if tensor.dtype in INT_RANGES:
                return f"torch.randint({INT_RANGES[tensor.dtype][0]}, {INT_RANGES[tensor.dtype][1]}, ()).item()"
            if tensor.dtype in FLOAT8_DTYPES:
                return f"torch.randn(()).clamp(-2.0, 2.0).to({dtype}).float().item()"
            return f"torch.randn((), dtype={dtype}).item()"
        sizes = [a if a.isdigit() else f"{dims}[{a!r}]" for a in tensor.shape]
        shape = "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"
        if tensor.dtype == "bool":
            return f"torch.randint(0, 2, {shape}).to(torch.bool)"
        if tensor.dtype in INT_RANGES:
            low, high = INT_RANGES[tensor.dtype]
            return f"torch.randint({low}, {high}, {shape}, dtype={dtype})"
        if tensor.dtype in FLOAT8_DTYPES:
            return f"torch.randn({shape}).clamp(-2.0, 2.0).to({dtype})"
        return _float_source(self.init_kind(tensor), shape, sizes[-1] if sizes else None, dtype)

    def get_workloads_function(self) -> str:
        items = []
        for w in self.workloads:
            item: dict[str, Any] = {"name": w.uuid, "axes": {**w.axes, **w.scalars}}
            if w.tolerance is not None:
                item["atol"] = w.tolerance.get("max_atol", DEFAULT_TOLERANCE)
                item["rtol"] = w.tolerance.get("max_rtol", DEFAULT_TOLERANCE)
            items.append(python_literal(item))
        return ('def get_workloads():\n    """The problem\'s workloads: the values each sets, and its tolerance."""\n'
                "    return [" + "".join(f"\n        {item}," for item in items) + "\n    ]")


# ---------------------------------------------------------------------------------------------
# Solutions: SOL-ExecBench's solution JSON as a single-file model_new.py.
# ---------------------------------------------------------------------------------------------

SOLUTION_MODEL_FILE = "model_new.py"
# SOL-ExecBench's C++ languages, built through the torch binding; every other language is Python.
CPP_LANGUAGES = ("cuda_cpp", "cutlass", "cudnn", "cublas")
CUDA_FILES = (".cu",)
CPP_FILES = (".cpp", ".cc", ".cxx", ".c")   # what their build compiles besides .cu
# compile_options' fields as SOL-ExecBench defaults them where the object is given; without the
# object their build passes no flags at all.
COMPILE_DEFAULTS = {"cflags": [], "cuda_cflags": ["-O3", "--use_fast_math"], "ld_flags": ["-lcuda"]}
# Names the generated Python module defines beside a Python solution's own.
_PYTHON_SCAFFOLDING = ("ModelNew", "_sol_torch", "_sol_nn", "_sol_entry", "_sol_whole")

_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*', re.M)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b[^\n]*\n?", re.M)
_CPP_TOKENS = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|(//[^\n]*|/\*.*?\*/)', re.S)
_PYBIND_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(")
_DECLARATION_HEAD = re.compile(r'(extern\s*"C"\s*)?[\w:<>,\s*&]+')


def solution_from_json(solution_path: Path, problem_folder: Path, out_dir: Path, *,
                       zero_outputs: bool = False) -> Path:
    """Write ``out_dir/model_new.py``: the SOL-ExecBench solution whose JSON is ``solution_path``,
    for the problem in ``problem_folder``, as a single-file solution this judge takes; return its
    path. ``zero_outputs`` allocates destinations with ``torch.zeros`` as SOL-ExecBench's harness
    does (for kernels that accumulate into them) instead of ``torch.empty``."""
    source = solution_source(solution_path, problem_folder, zero_outputs=zero_outputs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SOLUTION_MODEL_FILE
    path.write_text(source)
    return path


def solution_source(solution_path: Path, problem_folder: Path, *, zero_outputs: bool = False) -> str:
    """The ``model_new.py`` source ``solution_from_json`` writes."""
    problem = _Problem(Path(problem_folder))
    problem.read_definition()
    solution = _Solution(Path(solution_path))
    solution.read()
    return solution.model_source(problem, zero_outputs)


def _string_literal(text: str) -> str:
    """``text`` as a Python string literal: a raw triple-quoted one where that reads back exactly."""
    plain = all(c in "\n\t" or c >= " " for c in text)
    if plain and '"""' not in text and not text.endswith(('"', "\\")):
        return 'r"""' + text + '"""'
    return repr(text)


def _without_comments(code: str) -> str:
    """C/C++ ``code`` with its comments blanked (newlines kept), string literals left alone."""
    def blank(m: re.Match) -> str:
        return m.group(1) if m.group(1) is not None else re.sub(r"[^\n]", " ", m.group(2))
    return _CPP_TOKENS.sub(blank, code)


def _declaration(code: str, name: str) -> str | None:
    """The declaration (signature, up to its closing parenthesis) of the function ``name`` where
    ``code`` defines it outside any class, or None."""
    code = _without_comments(code)
    for m in re.finditer(rf"(?<![\w.:>]){re.escape(name)}\s*\(", code):
        depth, end = 0, m.end() - 1
        while end < len(code):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            if depth == 0:
                break
            end += 1
        else:
            return None
        if not re.match(r"\s*(?:(?:const|noexcept|override|final)\b\s*)*\{", code[end + 1:]):
            continue  # a call or a declaration, not the definition
        start = max(code.rfind(c, 0, m.start()) for c in ";{}") + 1
        head = " ".join(line for line in code[start:m.start()].splitlines() if not line.strip().startswith("#"))
        head = " ".join(re.sub(r"\b__host__\b", " ", head).split())  # nvcc's, unknown to the C++ compiler
        if not head or not _DECLARATION_HEAD.fullmatch(head) or head.split()[-1] in ("return", "else", "new"):
            continue
        return " ".join(f"{head} {name}{code[m.end() - 1:end + 1]}".split())
    return None


@dataclass
class _Solution:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    languages: list[str] = field(default_factory=list)
    cpp: bool = False
    entry_file: str = ""
    entry_function: str = ""
    dps: bool = True
    files: dict[str, str] = field(default_factory=dict)      # path -> content, in the JSON's order
    flags: dict[str, list[str]] = field(default_factory=dict)  # compile_options, defaults filled in

    def error(self, where: str, what: str, todo: str) -> TaskFormatError:
        return TaskFormatError(f"SOL-ExecBench solution {self.path}: {where}: {what}. {todo}")

    def schema_error(self, where: str, what: str) -> TaskFormatError:
        return self.error(where, what, "Fix the solution JSON to follow SOL-ExecBench's solution schema "
                                       "(docs/solution.md).")

    # -- reading ------------------------------------------------------------------------------

    def read(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error("the file", f"cannot be read as JSON ({exc})",
                             "Pass a solution JSON (spec and sources).") from None
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
            raise self.schema_error('"spec"', "is missing")
        self.data, spec = data, data["spec"]
        self.name = data.get("name") if isinstance(data.get("name"), str) and data.get("name") else self.path.stem
        languages = spec.get("languages")
        if not isinstance(languages, list) or not languages or not all(isinstance(x, str) for x in languages):
            raise self.schema_error('"spec".languages', "must be a non-empty list of language names")
        self.languages = languages
        cpp = [x for x in languages if x in CPP_LANGUAGES]
        python = [x for x in languages if x not in CPP_LANGUAGES]
        if cpp and python:
            raise self.error('"spec".languages', f"mixes C++ ({', '.join(cpp)}) and Python ({', '.join(python)}) "
                             "languages, which SOL-ExecBench does not allow either", "Keep one kind.")
        self.cpp = bool(cpp)
        entry = spec.get("entry_point")
        if not isinstance(entry, str) or entry.count("::") != 1:
            raise self.schema_error('"spec".entry_point', f'must be "<file>::<function>", not {entry!r}')
        self.entry_file, self.entry_function = entry.split("::")
        if not self.entry_function.isidentifier() or keyword.iskeyword(self.entry_function):
            raise self.schema_error('"spec".entry_point', f"{self.entry_function!r} is not a function name")
        dps = spec.get("destination_passing_style", True)  # true where absent, as in their schema
        if not isinstance(dps, bool):
            raise self.schema_error('"spec".destination_passing_style', f"must be true or false, not {dps!r}")
        self.dps = dps
        binding = spec.get("binding")
        if self.cpp and binding not in (None, "torch"):
            raise self.error('"spec".binding', f"is {binding!r}; only the torch binding is converted",
                             'Write the solution with "binding": "torch" (a PYBIND11_MODULE or a function '
                             "of torch::Tensor arguments).")
        self.read_sources()
        if self.cpp:
            self.read_compile_options(spec.get("compile_options"))

    def read_sources(self) -> None:
        sources = self.data.get("sources")
        if not isinstance(sources, list) or not sources:
            raise self.schema_error('"sources"', "must be a non-empty list of {path, content}")
        for k, item in enumerate(sources):
            where = f'"sources"[{k}]'
            if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not item["path"]:
                raise self.schema_error(where, "must be {\"path\": ..., \"content\": ...}")
            path = posixpath.normpath(item["path"])
            if item["path"].startswith("/") or path.startswith("../") or path == "..":
                raise self.schema_error(f"{where}.path", f"{item['path']!r} must be relative, inside the solution")
            if path in self.files:
                raise self.schema_error(f"{where}.path", f"{path!r} is given twice")
            content = item.get("content")
            if not content:  # as their command line does: read from beside the JSON
                beside = self.path.parent / path
                if not beside.is_file():
                    raise self.error(f"{where}.content", f"is empty and there is no {beside}",
                                     "Give the file's content, or put the file beside the solution JSON.")
                content = beside.read_text()
            if not isinstance(content, str):
                raise self.schema_error(f"{where}.content", "must be the file's text")
            self.files[path] = content
        self.entry_file = posixpath.normpath(self.entry_file)
        if self.entry_file not in self.files:
            raise self.error('"spec".entry_point', f"names the file {self.entry_file!r}, which is not among the "
                             f"sources ({', '.join(self.files)})", "Name a file of \"sources\" in the entry point.")

    def read_compile_options(self, options: Any) -> None:
        if options is None:
            self.flags = {key: [] for key in COMPILE_DEFAULTS}
            return
        if not isinstance(options, dict):
            raise self.schema_error('"spec".compile_options', "must be an object")
        for key, default in COMPILE_DEFAULTS.items():
            value = options.get(key, default)
            if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
                raise self.schema_error(f'"spec".compile_options.{key}', "must be a list of strings")
            self.flags[key] = list(value)

    # -- the model file -----------------------------------------------------------------------

    def model_source(self, problem: _Problem, zero_outputs: bool) -> str:
        d = problem.definition
        head = [f"# SOL-ExecBench solution {self.name} for {d['name']} ({', '.join(self.languages)}),",
                f"# converted from {self.path.name} by cuda_agent.sol_execbench.solution_from_json."]
        description = self.data.get("description")
        if isinstance(description, str) and description.strip():
            head += ["# " + line for line in textwrap.wrap(" ".join(description.split()), 96)]
        style = ("destination_passing_style true: forward allocates the outputs from the definition and "
                 "passes them last" if self.dps else "destination_passing_style false: forward returns "
                 "what the entry point returns")
        head += ["#", *("# " + line for line in textwrap.wrap(
            f"Entry point {self.entry_file}::{self.entry_function}; {style}.", 96))]
        if self.cpp:
            return self.cpp_model(problem, head, zero_outputs)
        return self.python_model(problem, head, zero_outputs)

    def inline(self, path: str, seen: set[str], names: list[str]) -> str:
        """``path``'s text with each ``#include "x"`` of a source inlined where first seen in this
        file group (later ones dropped: it is above, in the same translation unit)."""
        def include(m: re.Match) -> str:
            target = next((t for t in (posixpath.normpath(posixpath.join(posixpath.dirname(path), m.group(1))),
                                       posixpath.normpath(m.group(1))) if t in self.files), None)
            if target is None:
                return m.group(0)  # not among the sources: a system or toolkit header
            if target in seen:
                return f"// {m.group(0).strip()}: inlined above"
            seen.add(target)
            names.append(target)
            body = _PRAGMA_ONCE.sub("", self.inline(target, seen, names)).strip("\n")
            return f"// ---- {target} (inlined) ----\n{body}\n// ---- end of {target} ----"

        return _QUOTED_INCLUDE.sub(include, self.files[path])

    def cpp_model(self, problem: _Problem, head: list[str], zero_outputs: bool) -> str:
        groups: dict[str, list[tuple[str, str]]] = {"cpp": [], "cuda": []}   # (label, text)
        included: set[str] = set()
        for kind, suffixes in (("cpp", CPP_FILES), ("cuda", CUDA_FILES)):
            seen: set[str] = set()
            for path in self.files:
                if path.endswith(suffixes) and path not in seen:  # one included by another is above
                    seen.add(path)
                    names: list[str] = []
                    text = self.inline(path, seen, names)
                    included.update(names)
                    groups[kind].append((f"{path} ({', '.join(names)} inlined)" if names else path, text))
        if not groups["cpp"] and not groups["cuda"]:
            raise self.error('"sources"', "hold no C++ or CUDA file (" + ", ".join(CPP_FILES + CUDA_FILES) + ")",
                             "A C++ language solution builds its .cu/.cpp files.")
        left_out = [p for p in self.files if not p.endswith(CPP_FILES + CUDA_FILES) and p not in included]
        fn = self.entry_function
        cpp_code = _without_comments("\n".join(t for _, t in groups["cpp"]))
        cuda_code = _without_comments("\n".join(t for _, t in groups["cuda"]))
        if _PYBIND_MODULE.search(cpp_code) or _PYBIND_MODULE.search(cuda_code):
            functions = "None,  # the sources define PYBIND11_MODULE"
        elif _declaration(cpp_code, fn):
            functions = f"[{fn!r}],"
        elif (declaration := _declaration(cuda_code, fn)) is not None:
            # load_inline binds functions in main.cpp, so one defined in cuda.cu is declared there.
            groups["cpp"].append((f"declaration of {fn}, defined in the CUDA sources",
                                  f"{declaration};\n"))
            functions = f"[{fn!r}],"
        else:
            raise self.error('"spec".entry_point', f"no source defines PYBIND11_MODULE, and the function {fn} is "
                             "not defined in a .cu or .cpp file of the sources (after inlining their headers)",
                             f"Define {fn} in a compiled file, or bind it in a PYBIND11_MODULE(TORCH_EXTENSION_NAME, "
                             "m) block.")
        lines = head + ["#", "# Built with load_inline as SOL-ExecBench builds the files: the C++ files into cpp_sources,",
                        "# the CUDA files into cuda_sources, each header of the sources inlined where first included."]
        if left_out:
            lines.append(f"# Not built (no file includes them): {', '.join(left_out)}.")
        lines += ["", "import torch", "import torch.nn as nn", "from torch.utils.cpp_extension import load_inline", ""]
        names: dict[str, list[str]] = {"cpp": [], "cuda": []}
        for kind in ("cpp", "cuda"):
            for k, (label, text) in enumerate(groups[kind]):
                name = f"_SOL_{kind.upper()}_{k}"
                names[kind].append(name)
                lines += [f"# {label}", f"{name} = {_string_literal(text)}", ""]
        module = "sol_" + (re.sub(r"\W+", "_", self.name).strip("_") or "solution")[:48]
        call = ["_sol_ext = load_inline(", f"    name={module!r},",
                f"    cpp_sources=[{', '.join(names['cpp'])}],"]
        if names["cuda"]:
            call.append(f"    cuda_sources=[{', '.join(names['cuda'])}],")
        call.append(f"    functions={functions}")
        for key, argument in (("cflags", "extra_cflags"), ("cuda_cflags", "extra_cuda_cflags"),
                              ("ld_flags", "extra_ldflags")):
            if self.flags[key]:
                call.append(f"    {argument}={self.flags[key]!r},")
        call.append(")")
        lines += call
        lines += ["", ""] + self.model_class(problem, "_sol_ext." + fn, "torch", "nn", zero_outputs)
        return "\n".join(lines) + "\n"

    def python_model(self, problem: _Problem, head: list[str], zero_outputs: bool) -> str:
        if not self.entry_file.endswith(".py"):
            raise self.error('"spec".entry_point', f"a {', '.join(self.languages)} solution's entry file must be a "
                             f".py file, not {self.entry_file!r}", "Name the Python module that defines the entry.")
        modules = [p for p in self.files if p.endswith(".py")]
        if len(modules) > 1:
            raise self.error('"sources"', f"hold {len(modules)} Python files ({', '.join(modules)}); the conversion "
                             "carries one module into model_new.py", "Put the solution's Python code in one file.")
        source = self.files[self.entry_file]
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise self.error(self.entry_file, f"is not valid Python ({exc.msg}, line {exc.lineno})",
                             "Fix the source.") from None
        bound = _bound_names(tree)
        if self.entry_function not in bound:
            raise self.error('"spec".entry_point', f"{self.entry_file} defines no top-level {self.entry_function}",
                             "Name a function the module defines.")
        clash = sorted(n for n in bound if n in _PYTHON_SCAFFOLDING)
        if clash:
            raise self.error(self.entry_file, f"defines {', '.join(clash)}, which model_new.py defines around it",
                             "Rename them in the solution.")
        left_out = [p for p in self.files if p != self.entry_file]
        lines = head + ["#", f"# The solution's {self.entry_file} as it is, then ModelNew calling its {self.entry_function}."]
        if left_out:
            lines.append(f"# Not carried (not Python): {', '.join(left_out)}.")
        lines += [f"# ---- {self.entry_file} ----", source.rstrip("\n"), f"# ---- end of {self.entry_file} ----",
                  "", *(["import torch as _sol_torch"] if self.dps else []), "import torch.nn as _sol_nn", ""]
        call = self.entry_function
        if call in {t.name for t in problem.inputs}:  # forward's parameter would hide it
            lines.append(f"_sol_entry = {call}")
            call = "_sol_entry"
        lines += [""] + self.model_class(problem, call, "_sol_torch", "_sol_nn", zero_outputs)
        return "\n".join(lines) + "\n"

    def model_class(self, problem: _Problem, call: str, torch_name: str, nn_name: str, zero: bool) -> list[str]:
        params = [t.name for t in problem.inputs]
        args = ", ".join(params)
        body: list[str] = []
        init: list[str] = []
        helpers: list[str] = []
        if not self.dps:
            outputs = [t.name for t in problem.outputs]
            pick = (f"_sol_result[{outputs[0]!r}]" if len(outputs) == 1
                    else f"tuple(_sol_result[n] for n in {tuple(outputs)!r})")
            body += [f"_sol_result = {call}({args})",
                     "# outputs returned by name are taken in the definition's order, as SOL-ExecBench does",
                     f"return {pick} if isinstance(_sol_result, dict) else _sol_result"]
        else:
            allocation, locals_, device_buffer, whole = self.destinations(problem, call, torch_name, zero)
            body += allocation
            body.append(f"{call}({', '.join(params + locals_)})")
            body.append(f"return {', '.join(locals_) or 'None'}")
            if device_buffer:  # no tensor input to take the device from
                init = ["def __init__(self):", "    super().__init__()",
                        f'    self.register_buffer("_sol_device", {torch_name}.empty(0), persistent=False)', ""]
            if whole:
                helpers = [_WHOLE_HELPER.strip(), "", ""]
        lines = helpers + [f"class ModelNew({nn_name}.Module):"]
        lines += ["    " + line if line else "" for line in init]
        lines.append(f"    def forward(self{', ' if args else ''}{args}):")
        lines += ["        " + line for line in body]
        return lines

    def destinations(self, problem: _Problem, call: str, torch_name: str,
                     zero: bool) -> tuple[list[str], list[str], bool, bool]:
        """The lines that allocate the outputs as SOL-ExecBench's harness does (shapes from the
        definition's axes, read from the inputs' shapes where they appear there), the outputs'
        local names, whether the device comes from a buffer, whether ``_sol_whole`` is used."""
        tensors = [t for t in problem.inputs if t.shape is not None]
        taken = {t.name for t in problem.inputs} | {"self", torch_name, "nn", call.split(".")[0]}
        known: dict[str, str] = {}
        lines: list[str] = []
        whole = False
        output = ""

        def value(axis: str, stack: frozenset[str]) -> str:
            nonlocal whole
            if axis.isdigit():
                return axis
            if axis in known:
                return known[axis]
            spec = problem.axes[axis]
            if spec["type"] == "const":
                known[axis] = repr(spec["value"])
                return known[axis]
            where = next(((t.name, k) for t in tensors for k, a in enumerate(t.shape) if a == axis), None)
            if where is None and (spec["type"] != "expr" or axis in stack):
                raise self.error('"spec".destination_passing_style', f"the output {output}'s axis {axis} appears in "
                                 "no input's shape, so its size is not known when the entry point is called",
                                 "Such a solution cannot be converted with destination passing style; return the "
                                 "outputs instead (destination_passing_style false).")
            if where is not None:
                local = _fresh(axis, taken)
                taken.add(local)
                lines.append(f"{local} = {where[0]}.shape[{where[1]}]")
            else:
                tree = problem.expressions[axis]
                values = {n: value(n, stack | {axis}) for n in sorted(_names(tree))}

                class Substitute(ast.NodeTransformer):
                    def visit_Name(self, node: ast.Name) -> ast.AST:
                        return ast.parse(values[node.id], mode="eval").body

                expression = ast.unparse(Substitute().visit(ast.parse(ast.unparse(tree), mode="eval")))
                local = _fresh(axis, taken)
                taken.add(local)
                lines.append(f"{local} = _sol_whole({axis!r}, {expression})")
                whole = True
            known[axis] = local
            return local

        device = f"{tensors[0].name}.device" if tensors else "self._sol_device.device"
        make = "zeros" if zero else "empty"
        locals_: list[str] = []
        allocations: list[str] = []
        for k, tensor in enumerate(problem.outputs):
            output = tensor.name
            if tensor.shape is None:
                raise self.error('"spec".destination_passing_style', f"the output {tensor.name} is a scalar (shape "
                                 "null), which cannot be passed as a destination", "Return the outputs instead "
                                 "(destination_passing_style false).")
            sizes = [value(a, frozenset()) for a in tensor.shape]
            shape = "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"
            base = tensor.name if tensor.name.isidentifier() and not keyword.iskeyword(tensor.name) else f"output{k}"
            local = _fresh(base, taken | set(problem.axes))
            taken.add(local)
            locals_.append(local)
            allocations.append(f"{local} = {torch_name}.{make}({shape}, dtype={torch_name}.{tensor.dtype}, "
                               f"device={device})")
        return lines + allocations, locals_, not tensors, whole
