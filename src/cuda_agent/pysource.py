"""Static facts about a Python source, read from its AST without running it."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class InitSignature:
    """The parameters of a class's ``__init__``, without ``self``."""

    names: tuple[str, ...]
    has_varargs: bool
    has_varkw: bool

    def describe(self) -> str:
        parts = list(self.names)
        if self.has_varargs:
            parts.append("*args")
        if self.has_varkw:
            parts.append("**kwargs")
        return f"__init__({', '.join(parts)})"


def parse(source: str, origin: str) -> ast.Module:
    """Parse ``source``; raise SyntaxError whose message names ``origin`` and the line. A source
    too deeply nested or too large for the parser (RecursionError, MemoryError, a null byte's
    ValueError) is a SyntaxError too: it is the file's fault, never the reader's crash."""
    try:
        return ast.parse(source, filename=origin)
    except SyntaxError as exc:
        raise SyntaxError(f"{origin}:{exc.lineno}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise SyntaxError(f"{origin}: cannot be parsed ({type(exc).__name__}: nested too deeply, too "
                          "large or not text); write plainer code") from None


def top_level_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by def, class, assignment or import."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def init_signature(cls: ast.ClassDef) -> InitSignature | None:
    """The ``__init__`` parameters of ``cls``, or None when it does not define one."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            positional = [a.arg for a in args.posonlyargs + args.args][1:]  # drop self
            names = tuple(positional + [a.arg for a in args.kwonlyargs])
            return InitSignature(names, args.vararg is not None, args.kwarg is not None)
    return None


def imported_modules(tree: ast.Module) -> set[str]:
    """Every module named by an import statement anywhere in the tree."""
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules
