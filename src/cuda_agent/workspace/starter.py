"""The starting ``model_new.py`` of a workspace, generated from the task's source.

``ModelNew.__init__`` gets exactly the parameter list of ``Model.__init__`` (names, defaults and
annotations, copied from the task's AST), so the judge can build both from ``get_init_inputs()``
and load Model's weights into ModelNew. ``forward`` raises until the agent fills it in.
"""

from __future__ import annotations

import ast
import builtins

from .. import pysource
from ..errors import TaskFormatError
from ..task import Task

NOT_IMPLEMENTED_MESSAGE = "write your kernels in kernels/ and call them here"

# Names the generated file binds itself, before the class.
_PREAMBLE_NAMES = frozenset({"torch", "nn", "cuda_extension"})


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _format_arguments(args: ast.arguments) -> str:
    """``args`` as source text, spaced as PEP 8 writes it (``n: int = 3``, ``n=3``)."""

    def one(arg: ast.arg, default: ast.expr | None = None, prefix: str = "") -> str:
        text = prefix + arg.arg
        if arg.annotation is not None:
            text += f": {ast.unparse(arg.annotation)}"
        if default is not None:
            text += (" = " if arg.annotation is not None else "=") + ast.unparse(default)
        return text

    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = [one(arg, default) for arg, default in zip(positional, defaults)]
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg is not None:
        parts.append(one(args.vararg, prefix="*"))
    elif args.kwonlyargs:
        parts.append("*")
    parts += [one(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg is not None:
        parts.append(one(args.kwarg, prefix="**"))
    return ", ".join(parts)


def _parameters(func: ast.FunctionDef | None, fallback: str) -> str:
    """The parameter list of ``func`` as source text (``self`` included), with any return annotation."""
    if func is None:
        return f"({fallback})"
    text = f"({_format_arguments(func.args)})"
    if func.returns is not None:
        text += f" -> {ast.unparse(func.returns)}"
    return text


def _annotation_names(func: ast.FunctionDef | None) -> list[str]:
    """Names read by the annotations of ``func``'s parameters and return value."""
    if func is None:
        return []
    args = func.args
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    annotations = [a.annotation for a in every if a.annotation is not None]
    return _loaded_names(annotations + ([func.returns] if func.returns is not None else []))


def _default_names(func: ast.FunctionDef | None) -> list[str]:
    """Names read by the default values of ``func``'s parameters, in order of appearance."""
    if func is None:
        return []
    defaults = list(func.args.defaults) + [d for d in func.args.kw_defaults if d is not None]
    return _loaded_names(defaults)


def _loaded_names(nodes: list[ast.AST]) -> list[str]:
    names: list[str] = []
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in names:
                names.append(sub.id)
    return names


def _module_definitions(tree: ast.Module, wanted: list[str]) -> tuple[list[str], list[str]]:
    """Source of the task's top-level imports and assignments that bind ``wanted`` (and what
    those assignments read in turn), in the task's order; plus the names left unresolved."""
    known = _PREAMBLE_NAMES | set(dir(builtins))
    pending = [n for n in wanted if n not in known]
    chosen: dict[int, ast.stmt] = {}    # index in tree.body -> statement to emit
    resolved: set[str] = set()
    unresolved: list[str] = []
    while pending:
        name = pending.pop(0)
        if name in resolved or name in unresolved:
            continue
        found = False
        for index, node in enumerate(tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                aliases = [a for a in node.names if (a.asname or a.name).split(".")[0] == name]
                if not aliases:
                    continue
                previous = chosen.get(index)
                kept = list(previous.names) if isinstance(previous, (ast.Import, ast.ImportFrom)) else []
                kept += [a for a in aliases if a not in kept]
                if isinstance(node, ast.Import):
                    chosen[index] = ast.Import(names=kept)
                else:
                    chosen[index] = ast.ImportFrom(module=node.module, names=kept, level=node.level)
                found = True
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound = {t.id for t in targets if isinstance(t, ast.Name)}
                if name not in bound or node.value is None:
                    continue
                chosen[index] = node
                pending += [n for n in _loaded_names([node.value]) if n not in known]
                found = True
        (resolved.add if found else unresolved.append)(name)
    return [ast.unparse(chosen[i]) for i in sorted(chosen)], unresolved


def render_model_new(task: Task) -> str:
    """The text of a workspace's starting ``model_new.py`` for ``task``."""
    try:
        tree = pysource.parse(task.source, task.origin)
    except SyntaxError as exc:
        raise TaskFormatError(f"cannot read task {task.name}: {exc}") from None
    model = pysource.top_level_class(tree, "Model")
    if model is None:
        raise TaskFormatError(f"task {task.origin} defines no `class Model`")
    init = _method(model, "__init__")
    forward = _method(model, "forward")

    definitions, unresolved = _module_definitions(tree, _default_names(init))
    # Annotations naming anything but torch, nn and builtins (Optional, a task's own class) are
    # kept as written and left unevaluated.
    known = _PREAMBLE_NAMES | set(dir(builtins))
    unknown_annotations = [n for n in _annotation_names(init) + _annotation_names(forward) if n not in known]
    future = "from __future__ import annotations\n\n" if unknown_annotations else ""
    lines = [
        '"""ModelNew: the computation of Model (see model.py), done by your own kernels.',
        "",
        "ModelNew must take exactly the same constructor arguments as Model and create the same",
        "parameters and buffers (same names, shapes and dtypes): the judge builds it from",
        "get_init_inputs() and loads Model's weights into it with load_state_dict. forward may only",
        "allocate tensors, take views, and call the functions your kernels/*_binding.cpp files",
        "register in cuda_extension; SKILL.md has the rules.",
        '"""',
        "",
        future + "import torch",
        "import torch.nn as nn",
        "",
        "import cuda_extension",
        "",
    ]
    if definitions or unresolved:
        lines += ["# Used by the default values of Model's constructor arguments (copied from model.py)."]
        lines += definitions
        lines += [f"# {name} is used by a default value of Model.__init__: define it as model.py does"
                  for name in unresolved]
        lines.append("")
    lines += [
        "",
        "class ModelNew(nn.Module):",
        f"    def __init__{_parameters(init, 'self')}:",
        '        """Same arguments as Model.__init__. Create the same parameters and buffers as Model',
        "        (an nn.Linear or nn.Conv2d kept only as a holder of its weights is fine, as long as",
        '        forward never calls it), so that Model\'s state_dict loads into ModelNew."""',
        "        super().__init__()",
        "",
        f"    def forward{_parameters(forward, 'self, *inputs')}:",
        '        """Compute what Model.forward computes, by calling cuda_extension functions."""',
        f'        raise NotImplementedError("{NOT_IMPLEMENTED_MESSAGE}")',
    ]
    return "\n".join(lines) + "\n"
