"""What a solution's C++/CUDA sources define and call, for the runtime kernel record.

The judge attributes GPU kernels that ran during ``forward`` to the solution by name, and to
cuBLAS/cuDNN where the solution calls them; this reads both facts from the same lexed sources the
static rules scan (kernel files, and the code a single-file solution passes to ``load_inline``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...solution import Solution
from .cpp_lex import Token, lex
from .report import Report
from .task_ops import TaskOps

LIBRARY_PREFIXES = ("cublas", "cudnn")


@dataclass(frozen=True)
class KernelInventory:
    kernels: frozenset[str]   # names of the __global__ functions the solution defines
    calls_library: bool       # whether it calls cuBLAS or cuDNN (the static rules say if it may)


def kernel_inventory(solution: Solution) -> KernelInventory:
    from . import read_sources

    # Every library is let through here: whether the solution may call one is the static
    # rules' question, not this one, and their report is not wanted.
    sources = read_sources(solution, TaskOps(gemm=True, conv=True), "cuda", Report())
    names: set[str] = set()
    library = False
    for source in sources:
        tokens = [t for t in lex(source.text).tokens if not t.directive]
        for i, token in enumerate(tokens):
            if token.kind != "id":
                continue
            if token.text == "__global__":
                if name := _declared_name(tokens, i + 1):
                    names.add(name)
            library = library or token.text.startswith(LIBRARY_PREFIXES)
    return KernelInventory(frozenset(names), library)


def _declared_name(tokens: list[Token], start: int) -> str | None:
    """The function name after ``__global__``: the last identifier before its parameter list
    (``__launch_bounds__(...)`` and template arguments skipped)."""
    last: str | None = None
    i = start
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "op" and token.text in (";", "{"):
            return None
        if token.kind == "op" and token.text == "(":
            if last != "__launch_bounds__":
                return last
            depth = 0
            while i < len(tokens):  # skip the bounds' arguments
                depth += {"(": 1, ")": -1}.get(tokens[i].text, 0) if tokens[i].kind == "op" else 0
                if depth == 0:
                    break
                i += 1
            last = None
        elif token.kind == "id":
            last = token.text
        i += 1
    return None
