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
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import operator
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
        self.read_workloads()
        self.check_constraints()
        self.choose_varying()

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
