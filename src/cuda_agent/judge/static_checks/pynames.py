"""Name resolution for one Python file: which dotted origin (``torch.nn.functional.relu``) a
local name or attribute chain stands for.

Flow-insensitive and deliberately generous: a name bound by an import, or assigned from an
expression that resolves (``mm = torch.matmul``, ``t = __import__("torch")``,
``w = sys.modules["x"]``), stands for every origin it was ever given. With ``from M import *``
a name the file never binds stands for ``M.name``. An origin that goes through a module attribute
which *is* another module is named by that module (``torch.os.environ`` is ``os.environ``:
``canonical``), so that no rule is passed by reaching a module through another one.
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
import types
from collections import defaultdict
from pathlib import Path

BUILTIN_NAMES = frozenset(dir(builtins))
# Builtins that ``from torch import *`` replaces with torch functions of the same name.
STAR_SHADOWED_BUILTINS = frozenset({"sum", "max", "min", "abs", "round", "pow", "all", "any"})
_MAX_DEPTH = 24


def _module_of(node: ast.ImportFrom) -> str:
    # A relative import names a file next to model_new.py: treat it as that module by name.
    return node.module or ""


class Names:
    """The bindings of one module's names, built once from its AST."""

    def __init__(self, tree: ast.AST):
        self.bind: dict[str, set[str]] = defaultdict(set)
        self.stars: list[str] = []
        self.local: set[str] = set()           # bound by the file: def, class, assignment, argument
        self.defined_here: set[str] = set()    # functions and classes defined in the file
        self.params: set[str] = set()          # function parameters anywhere
        self.import_origins: set[str] = set()  # what import statements name
        self._assignments: list[tuple[str, ast.expr]] = []
        self._collect(tree)
        for _ in range(3):
            changed = False
            for name, value in self._assignments:
                found = self.resolve(value)
                if found - self.bind.get(name, set()):
                    self.bind[name] |= found
                    changed = True
            if not changed:
                break

    def _collect(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.import_origins.add(alias.name)
                    if alias.asname:
                        self.bind[alias.asname].add(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self.bind[top].add(top)
            elif isinstance(node, ast.ImportFrom):
                module = _module_of(node)
                for alias in node.names:
                    if alias.name == "*":
                        self.stars.append(module)
                        self.import_origins.add(module)
                        continue
                    origin = f"{module}.{alias.name}" if module else alias.name
                    self.import_origins.add(canonical(origin))
                    self.bind[alias.asname or alias.name].add(origin)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.local.add(node.name)
                self.defined_here.add(node.name)
            elif isinstance(node, ast.arg):
                self.local.add(node.arg)
                self.params.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.local.add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.local.add(node.name)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                self.local.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self.local.add(node.rest)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self._assignments.append((target.id, node.value))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
                if node.value is not None:
                    self._assignments.append((node.target.id, node.value))

    # ------------------------------------------------------------------------------------
    def is_builtin(self, name: str) -> bool:
        """``name`` refers to the builtin of that name (the file does not rebind it)."""
        return name in BUILTIN_NAMES and name not in self.local and name not in self.bind

    def is_external(self, name: str) -> bool:
        """``name`` stands for something imported, not defined by the file."""
        return bool(self.bind.get(name)) and name not in self.defined_here

    def resolve(self, node: ast.AST, depth: int = 0) -> set[str]:
        """The dotted origins ``node`` may stand for; empty when it is not an imported thing."""
        if depth > _MAX_DEPTH:
            return set()
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        base = self._resolve_base(node, depth)
        if not base or not attrs:
            return {canonical(b) for b in base}
        suffix = ".".join(reversed(attrs))
        return {canonical(f"{b}.{suffix}") for b in base}

    def _resolve_base(self, node: ast.AST, depth: int) -> set[str]:
        if isinstance(node, ast.Name):
            if node.id in self.bind:
                return set(self.bind[node.id])
            if self.stars and node.id not in self.local and (
                    node.id not in BUILTIN_NAMES or node.id in STAR_SHADOWED_BUILTINS):
                return {f"{m}.{node.id}" if m else node.id for m in self.stars}
            return set()
        if isinstance(node, ast.Call):
            literal = str_arg(node, 1)
            func = node.func
            if isinstance(func, ast.Name) and self.is_builtin(func.id):
                if func.id == "getattr" and literal is not None and node.args:
                    return {f"{b}.{literal}" for b in self.resolve(node.args[0], depth + 1)}
                if func.id == "__import__":
                    name = str_arg(node, 0)
                    if name is None:
                        return set()
                    has_fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
                    return {name if has_fromlist else name.split(".")[0]}
                if func.id == "vars" and node.args:
                    return {f"{b}.__dict__" for b in self.resolve(node.args[0], depth + 1)}
                return set()
            origins = self.resolve(func, depth + 1)
            if origins & {"importlib.import_module", "importlib.__import__"}:
                name = str_arg(node, 0)
                return {name} if name else set()
            return set()
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found: set[str] = set()
                for b in self.resolve(node.value, depth + 1):
                    if b == "sys.modules":
                        found.add(key.value)
                    elif b.endswith(".__dict__"):
                        found.add(f"{b[:-len('.__dict__')]}.{key.value}")
                return found
        return set()


@functools.lru_cache(maxsize=8192)
def canonical(origin: str, depth: int = 0) -> str:
    """``origin`` named by the module it reaches: where a component is an attribute of a module
    that is itself a module of another name (``torch.os`` is ``os``, ``torch.utils.cpp_extension.
    sys`` is ``sys``), the origin continues from that module's own name. Read from the modules the
    judge has imported (their ``__dict__`` alone), and for a submodule of one that it has not, from
    the imports at the top of its source: nothing is imported or run to find out."""
    parts = origin.split(".")
    module = sys.modules.get(parts[0])
    for k in range(1, len(parts)):
        if not _plain_module(module) or depth > _MAX_DEPTH:
            return origin
        here = ".".join(parts[:k + 1])
        value = vars(module).get(parts[k]) or sys.modules.get(here)
        if value is None:  # perhaps a submodule not loaded here: what its source imports
            target = _source_imports(here).get(parts[k + 1]) if k + 1 < len(parts) else None
            if target is None or target == f"{here}.{parts[k + 1]}":
                return origin
            return canonical(".".join([target, *parts[k + 2:]]), depth + 1)
        name = vars(value).get("__name__") if _plain_module(value) else None
        if isinstance(name, str) and name != here:
            return canonical(".".join([name, *parts[k + 1:]]), depth + 1)
        module = value
    return origin


def _plain_module(value: object) -> bool:
    """A module as an import makes it: not a namespace object whose attributes run code
    (torch.ops, torch.classes), which are read no further."""
    return type(value) is types.ModuleType


@functools.lru_cache(maxsize=512)
def _source_imports(dotted: str) -> dict[str, str]:
    """Names bound by the top-level imports of module ``dotted``'s source (``os`` -> ``os``,
    ``np`` -> ``numpy``), read when its parent package is loaded; {} otherwise."""
    import importlib.util

    parent = dotted.rpartition(".")[0]
    if not parent or parent not in sys.modules:
        return {}
    try:
        spec = importlib.util.find_spec(dotted)
        source = Path(spec.origin).read_text() if spec and spec.origin and spec.origin.endswith(".py") else ""
        tree = ast.parse(source)
    except (ImportError, ValueError, OSError, SyntaxError, RecursionError):
        return {}
    found: dict[str, str] = {}
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _top_level(body: list[ast.stmt]):
    """A module's statements, with those inside its top-level if/try blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body + node.orelse + node.finalbody)


def str_arg(call: ast.Call, index: int) -> str | None:
    """The call's positional argument ``index`` when it is a string literal."""
    if len(call.args) > index:
        arg = call.args[index]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def dotted_parts(origin: str) -> list[str]:
    return origin.split(".")


def under(origin: str, prefix: str) -> bool:
    """``origin`` is ``prefix`` or inside it, by whole components."""
    return origin == prefix or origin.startswith(prefix + ".")


def longest_prefix(origin: str, table: dict[str, tuple[str, str]]) -> tuple[str, tuple[str, str]] | None:
    parts = origin.split(".")
    for end in range(len(parts), 0, -1):
        key = ".".join(parts[:end])
        if key in table:
            return key, table[key]
    return None
