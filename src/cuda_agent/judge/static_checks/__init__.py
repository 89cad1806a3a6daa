"""Static checks: the candidate's sources, read before anything is built or run.

``scan_solution(solution, task, backend)`` returns every violation found, each naming its rule
(from ``rules.STATIC_RULES``), the file as named in ``solution.files``, the 1-based line and what
to do instead. Python is read through its AST (``python_scan``), C/C++/CUDA through a tokenizer
that drops comments and literals first (``cpp_lex``, ``cpp_scan``), including the sources a
single-file solution embeds in its ``load_inline`` call (``inline_sources``). Which libraries a
solution may call depends on the task's ops (``task_ops``). The name lists live in ``vocab``.

These are tripwires with messages for the author: the process boundary, fresh inputs and the
judge's own clock are what actually hold.
"""

from __future__ import annotations

from ...solution import CUDA_SOURCE_SUFFIXES, CXX_SOURCE_SUFFIXES, HEADER_SUFFIXES, MODEL_FILE, Solution
from ...task import Task
from ..verdict import Violation
from .cpp_scan import CppSource, scan_cpp
from .inline_sources import ldflag_problems
from .kernels import KernelInventory, kernel_inventory
from .python_scan import scan_python
from .report import Report
from .task_ops import TaskOps, task_ops

_CPP_SUFFIXES = CXX_SOURCE_SUFFIXES + CUDA_SOURCE_SUFFIXES + HEADER_SUFFIXES

__all__ = ["KernelInventory", "TaskOps", "kernel_inventory", "read_sources", "scan_inline_build", "scan_solution",
           "task_ops"]


def scan_solution(solution: Solution, task: Task, backend: str) -> list[Violation]:
    """Every static violation in ``solution`` (empty when it is clean), ordered by file and line."""
    ops = task_ops(task.source)
    report = Report()
    cpp = read_sources(solution, ops, backend, report)
    try:
        scan_cpp(cpp, ops, backend, report)
    except (RecursionError, MemoryError) as exc:
        _unreadable(report, cpp[0].file if cpp else "kernels", exc)
    return report.sorted(_file_order(solution))


def scan_inline_build(files: dict[str, str], ldflags: tuple[str, ...], task: Task, backend: str) -> list[Violation]:
    """Every violation in what a ``load_inline`` call asked the judge to build at run time: the
    exact files it would compile (``main.cpp``, ``cuda.cu``) and its linker flags. The static
    scan read model_new.py before it ran; this reads what it actually passed."""
    ops = task_ops(task.source)
    report = Report()
    sources = [CppSource(f"{MODEL_FILE} (load_inline's {name})", text) for name, text in files.items()]
    try:
        scan_cpp(sources, ops, backend, report)
    except (RecursionError, MemoryError) as exc:
        _unreadable(report, sources[0].file, exc)
    for flag in ldflags:
        for rule, message in ldflag_problems(flag, ops, backend):
            report.add(rule, MODEL_FILE, None, message)
    return report.violations


def _file_order(solution: Solution) -> list[str]:
    return sorted(solution.files, key=lambda p: (not p.endswith(".py"), p))


def read_sources(solution: Solution, ops: TaskOps, backend: str, report: Report) -> list[CppSource]:
    """Scan the Python files into ``report``; return every C/C++/CUDA source: the kernel files
    and the code a Python file passes to ``load_inline``."""
    cpp: list[CppSource] = []
    for path in _file_order(solution):
        text = solution.files[path]
        if not isinstance(text, str):
            continue
        if path.endswith(".py"):
            try:
                cpp += scan_python(text, path, report, ops, backend)
            except (RecursionError, MemoryError) as exc:
                _unreadable(report, path, exc)
        elif path.endswith(_CPP_SUFFIXES):
            cpp.append(CppSource(path, text))
    return cpp


def _unreadable(report: Report, path: str, exc: BaseException) -> None:
    # Fail closed: what the checks cannot read, they cannot pass.
    report.add("dynamic_code", path, None,
               f"the static checks could not read this file ({type(exc).__name__}: nesting too deep "
               "or too large); write plainer code")
