"""The C++/CUDA sources a single-file solution passes to ``torch.utils.cpp_extension.load_inline``.

Sources are read from the call's ``cpp_sources`` / ``cuda_sources`` arguments (keyword or
positional): string literals, f-strings (a formatted value reads as ``0``), ``+`` concatenation,
lists of strings, ``"".join([...])``, ``.format(...)``, ``textwrap.dedent(...)``, and names
assigned (and ``+=``-extended) with any of those. Each recovered source keeps a map from its
lines to the lines of model_new.py, so a violation points at the Python line that holds the code.
A source that cannot be recovered statically is itself a violation: what cannot be read cannot
be checked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .cpp_scan import CppSource
from .pynames import Names
from .task_ops import TaskOps

LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
_SOURCE_ARGS = (("cpp_sources", 1), ("cuda_sources", 2))
_MAX_DEPTH = 64
_MAX_PIECES = 20_000     # names reused over and over (x1 = x0 + x0, ...) would double without end
_ALWAYS_LINKABLE = frozenset({
    "cudart", "cuda", "c10", "c10_cuda", "torch", "torch_cpu", "torch_cuda", "torch_python",
    "gomp", "omp", "iomp5", "m", "stdc++", "pthread", "rt",
})

_LINK_OPTIONS = frozenset({"-fopenmp", "-pthread", "-g", "-s", "-shared", "-fPIC"})  # change nothing linked in

Piece = tuple[str, int]


@dataclass
class InlineFindings:
    sources: list[CppSource]
    problems: list[tuple[str, int, str]]     # (rule, line, message)


class _Assignments:
    """Module-wide string assignments, in source order, for following names."""

    def __init__(self, tree: ast.AST):
        self.by_name: dict[str, list[tuple[str, ast.expr]]] = {}
        found: list[tuple[int, int, str, str, ast.expr]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.append((node.lineno, node.col_offset, target.id, "=", node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                found.append((node.lineno, node.col_offset, node.target.id, "=", node.value))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                    and isinstance(node.op, ast.Add):
                found.append((node.lineno, node.col_offset, node.target.id, "+=", node.value))
        for _, _, name, op, value in sorted(found, key=lambda f: (f[0], f[1])):
            self.by_name.setdefault(name, []).append((op, value))


class _Reader:
    def __init__(self, names: Names, assignments: _Assignments):
        self.names = names
        self.assignments = assignments
        self.budget = _MAX_PIECES

    def read(self, node: ast.AST) -> list[Piece] | None:
        self.budget = _MAX_PIECES
        return self.pieces(node)

    def pieces(self, node: ast.AST, depth: int = 0, seen: frozenset[str] = frozenset()) -> list[Piece] | None:
        if depth > _MAX_DEPTH or self.budget <= 0:
            return None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                self.budget -= 1
                return [(node.value, node.lineno)]
            if node.value is None:
                return []
            return None
        if isinstance(node, ast.JoinedStr):
            text = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    text.append(value.value)
                else:
                    text.append(" 0 ")
            return [("".join(text), node.lineno)]
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._joined(node.elts, "\n", node.lineno, depth, seen)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Add):
                terms: list[ast.AST] = []      # a + b + c nests to the left: walk it iteratively
                while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                    terms.append(node.right)
                    node = node.left
                terms.append(node)
                out: list[Piece] = []
                for term in reversed(terms):
                    got = self.pieces(term, depth + 1, seen)
                    if got is None:
                        return None
                    out += got
                return out
            if isinstance(node.op, ast.Mod):
                return self.pieces(node.left, depth + 1, seen)
            return None
        if isinstance(node, ast.Name):
            if node.id in seen:
                return None
            history = self.assignments.by_name.get(node.id)
            if not history:
                return None
            last = max((k for k, (op, _) in enumerate(history) if op == "="), default=None)
            if last is None:
                return None
            out: list[Piece] = []
            for op, value in history[last:]:
                got = self.pieces(value, depth + 1, seen | {node.id})
                if got is None:
                    return None
                out += got
            return out
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                if func.attr == "format":
                    return self.pieces(func.value, depth + 1, seen)
                if func.attr == "join" and len(node.args) == 1:
                    sep = func.value
                    if isinstance(sep, ast.Constant) and isinstance(sep.value, str):
                        arg = node.args[0]
                        if isinstance(arg, (ast.List, ast.Tuple)):
                            return self._joined(arg.elts, sep.value, node.lineno, depth, seen)
                        return self.pieces(arg, depth + 1, seen)
                if func.attr in ("strip", "lstrip", "rstrip"):
                    return self.pieces(func.value, depth + 1, seen)
            origins = self.names.resolve(func)
            if origins & {"textwrap.dedent", "inspect.cleandoc"} or (
                    isinstance(func, ast.Name) and func.id == "str" and self.names.is_builtin("str")):
                if len(node.args) == 1:
                    return self.pieces(node.args[0], depth + 1, seen)
        return None

    def _joined(self, elts: list[ast.expr], sep: str, line: int, depth: int,
                seen: frozenset[str]) -> list[Piece] | None:
        out: list[Piece] = []
        for k, elt in enumerate(elts):
            got = self.pieces(elt, depth + 1, seen)
            if got is None:
                return None
            if k:
                out.append((sep, got[0][1] if got else line))
            out += got
        return out


def _assemble(pieces: list[Piece]) -> tuple[str, tuple[int, ...]]:
    """The source text and, for each of its lines, the Python line it came from."""
    mapping: list[int] = []
    for text, pyline in pieces:
        segments = text.split("\n")
        if not mapping:
            mapping.append(pyline)
        for k in range(1, len(segments)):
            mapping.append(pyline + k)
    return "".join(text for text, _ in pieces), tuple(mapping) or (1,)


def _argument(call: ast.Call, keyword: str, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return None


def _link_problems(call: ast.Call, ops: TaskOps, backend: str) -> list[tuple[str, int, str]]:
    problems: list[tuple[str, int, str]] = []
    include_paths = _argument(call, "extra_include_paths", 99)
    empty = (isinstance(include_paths, (ast.List, ast.Tuple)) and not include_paths.elts) or (
        isinstance(include_paths, ast.Constant) and include_paths.value is None)
    if include_paths is not None and not empty:
        problems.append(("library_use", include_paths.lineno,
                         "extra_include_paths brings in headers from outside the solution (CUTLASS and "
                         "the like); use only the system CUDA and torch headers"))
    ldflags = _argument(call, "extra_ldflags", 99)
    if ldflags is None:
        return problems
    flags = ldflags.elts if isinstance(ldflags, (ast.List, ast.Tuple)) else [ldflags]
    for flag in flags:
        if not (isinstance(flag, ast.Constant) and isinstance(flag.value, str)):
            problems.append(("dynamic_code", call.lineno, "extra_ldflags must be string literals so "
                                                          "that what is linked can be checked"))
            continue
        problems += [(rule, getattr(flag, "lineno", call.lineno), message)
                     for rule, message in ldflag_problems(flag.value, ops, backend)]
    return problems


def ldflag_problems(flag: str, ops: TaskOps, backend: str) -> list[tuple[str, str]]:
    """(rule, message) for each word of a linker flag that links what the rules do not allow."""
    allowed = set(_ALWAYS_LINKABLE)
    if backend == "cuda" and ops.allows_cublas:
        allowed |= {"cublas", "cublasLt"}
    if backend == "cuda" and ops.allows_cudnn:
        allowed |= {"cudnn"}
    problems = []
    for word in flag.split():
        lib = word[2:] if word.startswith("-l") else None
        if lib is not None and lib not in allowed:
            problems.append(("library_use", f"`{word}` links a library the rules do not allow here; only cuBLAS "
                                            "(for matrix products) and cuDNN (for convolutions) are allowed"))
        elif lib is None and word not in _LINK_OPTIONS and not word.startswith("-O"):
            problems.append(("library_use", f"`{word}` is not a library the rules allow; extra_ldflags may "
                                            "only name libraries (-lcublas, -lcudnn where the task allows them)"))
    return problems


def find_inline_sources(tree: ast.AST, names: Names, file: str, ops: TaskOps,
                        backend: str) -> InlineFindings:
    findings = InlineFindings([], [])
    reader: _Reader | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or LOAD_INLINE not in names.resolve(node.func):
            continue
        if reader is None:
            reader = _Reader(names, _Assignments(tree))
        found_any = False
        for keyword, position in _SOURCE_ARGS:
            arg = _argument(node, keyword, position)
            if arg is None:
                continue
            found_any = True
            pieces = reader.read(arg)
            if pieces is None:
                findings.problems.append((
                    "dynamic_code", getattr(arg, "lineno", node.lineno),
                    f"load_inline's {keyword} cannot be read without running the file; pass string "
                    "literals (or names assigned string literals) so that the code can be checked"))
                continue
            text, lines = _assemble(pieces)
            findings.sources.append(CppSource(file, text, lines))
        if not found_any and (any(k.arg is None for k in node.keywords)
                              or any(isinstance(a, ast.Starred) for a in node.args)):
            findings.problems.append((
                "dynamic_code", node.lineno,
                "load_inline's sources are passed through */** arguments and cannot be checked; pass "
                "cpp_sources / cuda_sources directly"))
        findings.problems += _link_problems(node, ops, backend)
    return findings
