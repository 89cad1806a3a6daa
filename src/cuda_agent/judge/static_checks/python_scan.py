"""The Python checks on model_new.py, over its AST (never its text).

Names are resolved through imports and aliases first (``pynames``), so ``F.relu``, ``t.matmul``
after ``import torch as t``, ``mm`` after ``from torch import matmul as mm``, a bare ``matmul``
after ``from torch import *`` and ``getattr(torch, "matmul")`` all read as the same origin.
String literals are data, never names: ``"torch.matmul"`` in a message is not a call.

Where a rule is about compute, ``__init__`` is exempt (it may build nn modules as holders of
their parameters, and draw initial weights); everything that runs later is not: ``forward``,
helpers, module-level code, class bodies, default arguments, and lambdas or functions defined
inside ``__init__``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

from . import vocab
from .cpp_scan import CppSource
from .inline_sources import LOAD_INLINE, find_inline_sources
from .pynames import Names, canonical, longest_prefix, str_arg, under
from .report import Report
from .task_ops import TaskOps

# Methods of an nn module that run its computation.
FORWARD_NAMES = frozenset({
    "forward", "__call__", "_call_impl", "_wrapped_call_impl", "_conv_forward", "_forward_impl",
    "_slow_forward",
})
_MODULE_ITERATORS = frozenset({"children", "modules", "named_children", "named_modules", "values", "items"})
_MODULE_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_NON_TENSOR_BUILTINS = frozenset({
    "str", "list", "dict", "set", "tuple", "int", "float", "bool", "range", "enumerate", "zip",
    "sorted", "reversed", "len", "map", "filter", "bytes", "frozenset", "iter", "repr", "format",
    "super", "divmod", "hash", "id", "isinstance",
})
_NON_TENSOR_TORCH = frozenset({
    "torch.finfo", "torch.iinfo", "torch.device", "torch.Size", "torch.dtype", "torch.Generator",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability",
})
_TENSOR_ROOTS = frozenset({"torch", "numpy", "cuda_extension"})
_COMPUTE_CALLABLES = frozenset({
    "torch.compile", "torch.vmap", "torch.autograd.grad", "torch.autograd.backward",
})
_TENSOR_SUBCLASS_BASES = frozenset({
    "torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer",
    "torch.nn.parameter.Buffer", "torch.TensorBase",
})

ADVICE = {
    "torch_compute": "forward may only allocate (torch.empty, torch.empty_like), take views and call "
                     "cuda_extension functions: do this computation in your kernel",
    "reference_access": "ModelNew must stand alone: do not import, subclass, alias or call the "
                        "reference Model",
    "exception_fallback": "let errors propagate: no fallback paths",
    "concurrency": "do all work inside the call, on the current stream, with the judge's thread count",
    "introspection": "solutions may not inspect the interpreter, the judge or PyTorch's internals",
    "monkeypatch": "do not modify torch, the standard library or the judge; define your own names instead",
    "dynamic_code": "write all code out statically, with literal names",
    "native_access": "run native code only through your compiled kernels (cuda_extension or load_inline)",
    "numerics_flags": "leave global numerics settings, the default dtype/device and random state alone",
    "io_access": "solutions may not touch files, the network, the environment or the process",
    "library_use": "write the kernel yourself; only cuBLAS (matrix products) and cuDNN "
                   "(convolutions), called from your C++ sources, are allowed",
}


@dataclass(frozen=True)
class _Ctx:
    in_init: bool = False


# torch namespaces whose private helpers (``_pair``, ``_calculate_fan_in_and_fan_out``) are
# ordinary code, and torch.ops whose ``_``-ops are judged as compute instead.
_PRIVATE_OK = ("torch.ops", "torch.nn.init", "torch.nn.modules.utils")


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _in_compute_namespace(origin: str, called: bool) -> bool:
    for ns in vocab.TORCH_COMPUTE_NAMESPACES:
        if origin == ns:
            return called or ns in _COMPUTE_CALLABLES
        if origin.startswith(ns + "."):
            return True
    return False


def torch_call_compute(origin: str) -> bool:
    """Whether calling ``origin`` (outside __init__) computes with PyTorch."""
    parts = origin.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if _in_compute_namespace(origin, called=True):
        return True
    if len(parts) == 2:
        name = parts[1]
        return not (name in vocab.TORCH_ALLOWED_CALLS or name[:1].isupper() or name.startswith("_"))
    if parts[1] in vocab.COMPUTE_FUNCTIONS:     # torch.matmul.__call__ and the like
        return True
    if parts[1] == "Tensor":
        return vocab.is_compute_method(parts[2])
    if parts[1] == "nn":
        return parts[-1] in FORWARD_NAMES
    return False


def torch_ref_compute(origin: str) -> bool:
    """Whether merely referring to ``origin`` (``f = torch.relu``) names a compute function."""
    parts = origin.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if _in_compute_namespace(origin, called=False):
        return True
    if parts[1] in vocab.COMPUTE_FUNCTIONS:     # torch.relu, torch.matmul.__call__
        return True
    if len(parts) == 2:
        return False
    if parts[1] == "Tensor":
        return vocab.is_compute_method(parts[2])
    if parts[1] == "nn":
        return parts[-1] in FORWARD_NAMES
    return False


def _nn_module_class(origin: str) -> str | None:
    """The class name when ``origin`` is a torch.nn module class (``torch.nn.Linear``)."""
    parts = origin.split(".")
    if parts[:2] != ["torch", "nn"] or len(parts) < 3:
        return None
    last = parts[-1]
    if len(parts) == 3 or parts[2] == "modules":
        if last[:1].isupper() and last not in vocab.NN_NON_COMPUTE_CLASSES:
            return last
    return None


def _origin_rule(origin: str) -> str | None:
    found = longest_prefix(origin, vocab.PY_ORIGIN_RULES)
    return found[1][0] if found else None


def _returns_truthy(func: ast.AST) -> bool:
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Constant) and node.value.value in (None, False):
                continue
            return True
    return False


class _PyScan:
    def __init__(self, tree: ast.Module, file: str, report: Report, ops: TaskOps, backend: str):
        self.tree, self.file, self.report, self.ops, self.backend = tree, file, report, ops, backend
        self.names = Names(tree)
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self.module_names: set[str] = set()
        self.module_attrs: set[str] = set()
        self._track_modules()
        self.non_tensor_names = self._non_tensor_names()
        self.bound_names: set[str] = set()
        self.bound_attrs: set[str] = set()
        self._track_bound_methods()

    # -- reporting ------------------------------------------------------------------------
    def add(self, rule: str, node: ast.AST | int, what: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", None)
        self.report.add(rule, self.file, line, f"{what}; {ADVICE[rule]}")

    # -- what is an nn module, what is surely not a tensor --------------------------------
    def _module_classes(self, call: ast.Call) -> set[str]:
        return {cls for origin in self.names.resolve(call.func) if (cls := _nn_module_class(origin))}

    def _is_module_ctor(self, call: ast.Call) -> bool:
        classes = self._module_classes(call)
        if classes - _MODULE_CONTAINERS:
            return True
        if not classes:
            return False
        # a container computes only through what it holds, at any depth (one walk, no recursion)
        for sub in ast.walk(call):
            if isinstance(sub, ast.Call) and sub is not call and self._module_classes(sub) - _MODULE_CONTAINERS:
                return True
            if isinstance(sub, ast.Name) and sub.id in self.module_names:
                return True
        return False

    def _is_module_expr(self, node: ast.AST) -> bool:
        while isinstance(node, ast.Subscript):   # an element of a module container
            node = node.value
        if isinstance(node, ast.Call):
            if self._is_module_ctor(node):
                return True
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _MODULE_ITERATORS:
                recv = func.value
                return (isinstance(recv, ast.Name) and recv.id == "self") or self._is_module_expr(recv)
            if isinstance(func, ast.Name) and func.id == "getattr" and self.names.is_builtin("getattr"):
                literal = str_arg(node, 1)
                return (literal is not None and literal in self.module_attrs
                        and isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
            return False
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return node.attr in self.module_attrs or node.attr == "_modules"
            return False
        if isinstance(node, ast.Name):
            return node.id in self.module_names
        return False

    def _track_modules(self) -> None:
        for _ in range(3):
            before = (len(self.module_names), len(self.module_attrs))
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    if not self._is_module_expr(node.value):
                        continue
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self._mark_module_target(target)
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    if self._is_module_expr(node.iter):
                        self._mark_module_target(node.target)
                elif isinstance(node, ast.Call):
                    func = node.func
                    literal = str_arg(node, 0) if isinstance(func, ast.Attribute) else str_arg(node, 1)
                    value = None
                    if isinstance(func, ast.Attribute) and func.attr in ("add_module", "register_module") \
                            and len(node.args) >= 2:
                        value = node.args[1]
                    elif isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) >= 3:
                        value = node.args[2]
                    if value is not None and literal and self._is_module_expr(value):
                        self.module_attrs.add(literal)
                    # self.layers.append(nn.Linear(...)) makes self.layers a container of modules
                    if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert", "update") \
                            and isinstance(func.value, ast.Attribute) and isinstance(func.value.value, ast.Name) \
                            and func.value.value.id == "self" and any(
                                isinstance(sub, ast.Call) and self._is_module_ctor(sub)
                                for arg in node.args for sub in ast.walk(arg)):
                        self.module_attrs.add(func.value.attr)
            if (len(self.module_names), len(self.module_attrs)) == before:
                break

    def _mark_module_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.module_names.add(target.id)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            self.module_attrs.add(target.attr)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._mark_module_target(elt)

    def _non_tensor_value(self, value: ast.AST) -> bool:
        if isinstance(value, (ast.Constant, ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict,
                              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return True
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Name) and func.id in _NON_TENSOR_BUILTINS and self.names.is_builtin(func.id):
                return True
            origins = self.names.resolve(func)
            if origins and all(o in _NON_TENSOR_TORCH or o.split(".")[0] not in _TENSOR_ROOTS for o in origins):
                return LOAD_INLINE not in origins
        return False

    def _non_tensor_names(self) -> set[str]:
        verdict: dict[str, bool] = defaultdict(lambda: True)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        verdict[target.id] &= self._non_tensor_value(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                verdict[node.target.id] &= self._non_tensor_value(node.value)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension, ast.withitem, ast.NamedExpr)):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                for sub in ast.walk(target) if target is not None else ():
                    if isinstance(sub, ast.Name):
                        verdict[sub.id] = False
        return {name for name, ok in verdict.items() if ok and name not in self.names.params}

    def _is_non_tensor(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.non_tensor_names
        return self._non_tensor_value(node)

    # -- traversal ------------------------------------------------------------------------
    def run(self) -> list[CppSource]:
        stack: list[tuple[ast.AST, _Ctx]] = [(self.tree, _Ctx())]
        outer = _Ctx()
        while stack:
            node, ctx = stack.pop()
            self.visit(node, ctx)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                is_init = node.name == "__init__" and isinstance(self.parents.get(id(node)), ast.ClassDef)
                inner = _Ctx(in_init=is_init)
                for child in node.decorator_list + [node.args] + ([node.returns] if node.returns else []):
                    stack.append((child, ctx))
                for child in node.body:
                    stack.append((child, inner))
            elif isinstance(node, ast.Lambda):
                stack.append((node.args, ctx))
                stack.append((node.body, outer))
            elif isinstance(node, ast.ClassDef):
                for child in node.bases + node.keywords + node.decorator_list:
                    stack.append((child, ctx))
                for child in node.body:
                    stack.append((child, outer))
            else:
                for child in ast.iter_child_nodes(node):
                    stack.append((child, ctx))
        found = find_inline_sources(self.tree, self.names, self.file, self.ops, self.backend)
        for rule, line, message in found.problems:
            self.report.add(rule, self.file, line, message)
        return found.sources

    def visit(self, node: ast.AST, ctx: _Ctx) -> None:
        if isinstance(node, ast.Name):
            self.visit_name(node, ctx)
        elif isinstance(node, ast.Attribute):
            self.visit_attribute(node, ctx)
        elif isinstance(node, ast.Call):
            self.visit_call(node, ctx)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.visit_import(node)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            if isinstance(node.op, ast.MatMult) and not ctx.in_init:
                self.add("torch_compute", node, "the `@` operator multiplies matrices with PyTorch")
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            for handler in node.handlers:
                self.add("exception_fallback", handler, "`except` catches a failure and carries on another way")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.visit_function(node)
        elif isinstance(node, ast.ClassDef):
            self.visit_class(node)
        elif isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            self.add("concurrency", node, "asynchronous code runs work outside the call")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            for origin in self.names.resolve(node.value):
                if origin == "sys.modules" or origin.endswith(".__dict__") or under(origin, "builtins"):
                    self.add("monkeypatch", node, f"writes into `{origin}`")

    # -- imports --------------------------------------------------------------------------
    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        origins: list[str] = []
        if isinstance(node, ast.Import):
            origins = [alias.name for alias in node.names]
        else:
            module = node.module or ""
            if module:
                origins.append(module)
            for alias in node.names:
                if alias.name == "Model":
                    self.add("reference_access", node, "imports the reference `Model`")
                if alias.name != "*":
                    origins.append(f"{module}.{alias.name}" if module else alias.name)
        origins = [canonical(origin) for origin in origins]  # `from torch import os` imports os
        for origin in origins:
            self._module_rule(origin, node, at_import=True)
            found = longest_prefix(origin, vocab.PY_ORIGIN_RULES)
            if found and found[1][0] != "numerics_flags":
                self.add(found[1][0], node, f"`{origin}` {found[1][1]}")
            self._private_torch(origin, node)
        if isinstance(node, ast.Import):
            for origin in origins:
                self._allowed_module(origin, node)
        elif node.module and not node.level:
            self._allowed_module(node.module, node)

    def _allowed_module(self, origin: str, node: ast.AST) -> None:
        """Anything outside the allowed modules breaks ``library_use`` (unless a more precise
        rule already named the module)."""
        top = origin.split(".")[0]
        if top in vocab.ALLOWED_PY_MODULES or longest_prefix(origin, vocab.PY_MODULE_RULES):
            return
        allowed = ", ".join(sorted(m for m in vocab.ALLOWED_PY_MODULES if m != "__future__"))
        self.add("library_use", node, f"imports `{top}`; a solution's Python may import only {allowed}")

    def _module_rule(self, origin: str, node: ast.AST, at_import: bool) -> None:
        found = longest_prefix(origin, vocab.PY_MODULE_RULES)
        if not found:
            return
        key, (rule, why) = found
        if not at_import and any(m == key or m.startswith(key + ".") for m in self.names.import_origins):
            return  # reported at the import statement
        self.add(rule, node, f"`{key}` {why}")

    def _private_torch(self, origin: str, node: ast.AST) -> None:
        parts = origin.split(".")
        if parts[0] != "torch" or any(under(origin, ns) for ns in _PRIVATE_OK):
            return
        if any(p.startswith("_") and not _is_dunder(p) for p in parts[1:]):
            self.add("introspection", node, f"`{origin}` is a private PyTorch internal")

    # -- names and attribute chains -------------------------------------------------------
    def visit_name(self, node: ast.Name, ctx: _Ctx) -> None:
        if node.id == "Model":
            self.add("reference_access", node, "refers to the reference `Model`")
        if node.id == "__builtins__" and node.id not in self.names.local:
            self.add("introspection", node, "`__builtins__` reaches the builtins namespace")
        if isinstance(node.ctx, ast.Load) and self.names.is_builtin(node.id):
            rule = vocab.PY_BUILTIN_RULES.get(node.id)
            if rule:
                self.add(rule[0], node, f"`{node.id}` {rule[1]}")
            parent = self.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            if node.id in ("getattr", "setattr", "delattr") and not called:
                self.add("dynamic_code", node, f"`{node.id}` passed around as a value hides what it reaches")
        self._chain(node, ctx)

    def visit_attribute(self, node: ast.Attribute, ctx: _Ctx) -> None:
        attr = node.attr
        if attr == "Model":
            self.add("reference_access", node, "refers to the reference `Model`")
        if attr in vocab.INTROSPECTION_ATTRIBUTES and not (
                attr == "__dict__" and isinstance(node.value, ast.Name) and node.value.id == "self"):
            self.add("introspection", node, f"`.{attr}` reaches into interpreter internals")
        if attr in vocab.DYNAMIC_ATTRIBUTES:
            self.add("dynamic_code", node, f"`.{attr}` looks names up at runtime")
        self._chain(node, ctx)

    def _chain(self, node: ast.Name | ast.Attribute, ctx: _Ctx) -> None:
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # only the outermost attribute of a chain is checked
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return  # binding a name of one's own changes nothing outside the file
        if isinstance(parent, ast.Call) and parent.func is node:
            role = "call"
        elif isinstance(node.ctx, (ast.Store, ast.Del)):
            role = "store"
        else:
            role = "ref"
        origins = self.names.resolve(node)
        for origin in sorted(origins):
            self._origin(origin, role, node, ctx)
        if isinstance(node, ast.Attribute):
            if role == "store":
                self._store(node, origins)
            elif role == "call" and not origins:
                self._method_call(node, ctx)
        if role == "call" and not ctx.in_init and self._is_bound_method(node):
            self.add("torch_compute", node, f"`{ast.unparse(node)}` is a PyTorch compute method kept in a "
                                            "variable")
        if role == "call" and not ctx.in_init and self._is_module_expr(node):
            self.add("torch_compute", node, f"calls an nn module (`{ast.unparse(node)}`), which runs PyTorch's "
                                            "forward; keep nn modules only as holders of their weights")

    def _origin(self, origin: str, role: str, node: ast.AST, ctx: _Ctx) -> None:
        self._module_rule(origin, node, at_import=False)
        ruled = False
        found = longest_prefix(origin, vocab.PY_ORIGIN_RULES)
        if found:
            key, (rule, why) = found
            ruled = True
            if rule == "numerics_flags" and under(origin, "torch.backends"):
                last = origin.split(".")[-1]
                if role == "store" or (role == "call" and last not in vocab.TORCH_BACKENDS_QUERIES):
                    self.add(rule, node, f"`{origin}` changes a global backend setting")
            else:
                self.add(rule, node, f"`{origin}` {why}")
        self._private_torch(origin, node)
        if origin == LOAD_INLINE and role == "ref":
            self.add("dynamic_code", node, "load_inline passed around as a value hides the sources it "
                                           "builds; call it directly with cpp_sources / cuda_sources")
        if role == "store" or ruled:
            return
        in_init_call = role == "call" and ctx.in_init
        parts = origin.split(".")
        if not in_init_call:
            compute = torch_call_compute(origin) if role == "call" else torch_ref_compute(origin)
            if compute:
                self.add("torch_compute", node, f"`{origin}` computes with PyTorch")
            if origin in ("operator.matmul", "operator.imatmul", "operator.__matmul__", "operator.__imatmul__"):
                self.add("torch_compute", node, f"`{origin}` multiplies matrices with PyTorch")
            if parts[0] == "numpy" and len(parts) == 2 and parts[1] in vocab.NUMPY_COMPUTE:
                self.add("library_use", node, f"`{origin}` computes with NumPy")

    def _store(self, node: ast.Attribute, origins: set[str]) -> None:
        if origins:
            if any(_origin_rule(o) == "numerics_flags" for o in origins):
                return  # reported as numerics_flags
            origin = sorted(origins)[0]
            self.add("monkeypatch", node, f"replaces `{origin}`, which this file did not define")
            return
        root: ast.AST = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "type":
            self.add("monkeypatch", node, f"replaces `.{node.attr}` on a type this file did not define")
        elif _is_dunder(node.attr) and not (isinstance(root, ast.Name) and (
                root.id == "self" or root.id in self.names.defined_here)):
            self.add("monkeypatch", node, f"replaces `.{node.attr}` on an object this file did not define")

    def _method_call(self, func: ast.Attribute, ctx: _Ctx) -> None:
        if ctx.in_init:
            return
        method, recv = func.attr, func.value
        if self._is_module_expr(recv) and (method in FORWARD_NAMES or (
                method.startswith("_") and not _is_dunder(method))):
            self.add("torch_compute", func, f"`.{method}()` runs an nn module's forward; keep nn modules only "
                                            "as holders of their weights")
            return
        if method in vocab.HOST_EXPORT_METHODS and not self._is_non_tensor(recv):
            self.add("library_use", func, f"`.{method}()` hands the tensor's data to Python or NumPy, to be "
                                          "computed on outside the solution's kernels")
        elif vocab.is_compute_method(method) and not self._is_non_tensor(recv):
            self.add("torch_compute", func, f"`.{method}()` computes with PyTorch")
        elif self._lowers_precision(func) and not self._is_non_tensor(recv):
            self.add("torch_compute", func, f"`.{method}(...)` casts to a lower precision with PyTorch, "
                                            "trading accuracy for speed; keep the task's dtype")

    def _lowers_precision(self, func: ast.Attribute) -> bool:
        """``x.half()``, ``x.bfloat16()``, ``x.to(torch.float16)``, ``x.to(dtype=torch.int8)``."""
        if func.attr in vocab.LOW_PRECISION_METHODS:
            return True
        if func.attr not in ("to", "type"):
            return False
        call = self.parents.get(id(func))
        if not isinstance(call, ast.Call):
            return False
        for arg in list(call.args) + [k.value for k in call.keywords if k.arg in (None, "dtype")]:
            for origin in self.names.resolve(arg):
                parts = origin.split(".")
                if parts[0] == "torch" and parts[-1] in vocab.LOW_PRECISION_DTYPES:
                    return True
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                    arg.value.split(".")[-1] in vocab.LOW_PRECISION_DTYPES
                    or arg.value.split(".")[-1] in ("HalfTensor", "BFloat16Tensor", "CharTensor", "ByteTensor")):
                return True
        return False

    def _bound_method(self, value: ast.AST) -> bool:
        """``value`` is ``<something>.matmul`` (a compute method, bound, not called)."""
        return (isinstance(value, ast.Attribute) and vocab.is_compute_method(value.attr)
                and not self.names.resolve(value) and not self._is_non_tensor(value.value))

    def _track_bound_methods(self) -> None:
        """Names and self attributes assigned a bound compute method (``f = x.matmul``)."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                    and self._bound_method(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.bound_names.add(target.id)
                    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self":
                        self.bound_attrs.add(target.attr)

    def _is_bound_method(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.bound_names
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and node.attr in self.bound_attrs)

    # -- calls ----------------------------------------------------------------------------
    def visit_call(self, node: ast.Call, ctx: _Ctx) -> None:
        func = node.func
        if isinstance(func, ast.Name) and self.names.is_builtin(func.id):
            self._builtin_call(node, func.id)
        if isinstance(func, ast.Call):
            if not ctx.in_init and self._is_module_expr(func):
                self.add("torch_compute", node, "calls an nn module, which runs PyTorch's forward")
            elif isinstance(func.func, ast.Name) and func.func.id == "getattr" and self.names.is_builtin("getattr"):
                literal = str_arg(func, 1)
                if literal is not None and func.args:
                    origins = self.names.resolve(func)
                    for origin in sorted(origins):
                        self._origin(origin, "call", node, ctx)
                    if not origins and not ctx.in_init and not self._is_non_tensor(func.args[0]):
                        if vocab.is_compute_method(literal):
                            self.add("torch_compute", node, f"`getattr(..., {literal!r})()` computes with PyTorch")
                        elif literal in FORWARD_NAMES and self._is_module_expr(func.args[0]):
                            self.add("torch_compute", node, "runs an nn module's forward")
        elif isinstance(func, ast.Subscript) and not ctx.in_init and self._is_module_expr(func.value):
            self.add("torch_compute", node, "calls an nn module held in a container, which runs PyTorch's forward")

    def _builtin_call(self, node: ast.Call, name: str) -> None:
        if name in ("getattr", "setattr", "delattr", "hasattr"):
            literal = str_arg(node, 1)
            if len(node.args) >= 2 and literal is None and name != "hasattr":
                self.add("dynamic_code", node, f"`{name}` with a name computed at runtime hides what it reaches")
            if literal == "Model":
                self.add("reference_access", node, "reaches the reference `Model` by name")
            if literal is not None and literal in vocab.INTROSPECTION_ATTRIBUTES:
                self.add("introspection", node, f"reaches `.{literal}` by name")
            if name in ("setattr", "delattr") and node.args:
                target = node.args[0]
                origins = self.names.resolve(target)
                if any(under(o, "torch.backends") for o in origins):
                    self.add("numerics_flags", node, f"`{name}` changes a global backend setting")
                elif origins:
                    self.add("monkeypatch", node, f"`{name}` on `{sorted(origins)[0]}`, which this file did "
                                                  "not define")
                elif isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "type":
                    self.add("monkeypatch", node, f"`{name}` on a type this file did not define")
        elif name == "type" and len(node.args) == 3:
            self.add("dynamic_code", node, "`type(name, bases, dict)` builds a class at runtime")

    # -- definitions ----------------------------------------------------------------------
    def visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("introspection", node, f"defining `{node.name}` intercepts PyTorch's dispatch")
        if node.name in ("__exit__", "__aexit__") and _returns_truthy(node):
            self.add("exception_fallback", node, f"`{node.name}` that returns a value can swallow exceptions")
        if isinstance(node, ast.AsyncFunctionDef):
            self.add("concurrency", node, "`async def` runs work outside the call")

    def visit_class(self, node: ast.ClassDef) -> None:
        if node.name == "Model":
            self.add("reference_access", node, "defines a class named `Model`, the reference's name")
        for base in node.bases:
            for origin in sorted(self.names.resolve(base)):
                if origin in _TENSOR_SUBCLASS_BASES:
                    self.add("introspection", node, f"subclasses `{origin}`: tensor subclasses can fake or "
                                                    "defer results")
                    continue
                cls = _nn_module_class(origin)
                if cls and cls not in vocab.NN_BASES_WITHOUT_FORWARD:
                    self.add("torch_compute", node, f"inherits `{origin}`, whose forward computes with PyTorch; "
                                                    "subclass nn.Module")


def scan_python(source: str, file: str, report: Report, ops: TaskOps, backend: str) -> list[CppSource]:
    """Check one Python file; return the C++/CUDA sources it passes to load_inline."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []   # validation reports unparsable files, with the line
    return _PyScan(tree, file, report, ops, backend).run()
