"""What the candidate's built extension links to, read by the judge from the binary it built.

The op counter inside the candidate's process sees ATen ops entered through the dispatcher. C++
can also reach ATen's kernels below it (``at::cpu::mm``, ``at::native::...``, an op's
``redispatch``, the dispatcher's own tables), or a BLAS, and on the cpu backend no other record
sees that work. The plain paths leave a mark the candidate cannot hide: the extension imports the
symbol, or imports the means to find one at run time (``dlsym``, opening a library's file,
mapping memory, a raw system call). The judge links the module itself, so its dynamic symbol
table is a record taken on the trusted side; this module reads it (``nm``, from the binutils
that linked it) and names every import on those paths.

Only the imports the solution's own code makes count. Some toolchains link parts of the C++
runtime into every module (GCC 13 with torch 2.11: ``std::random_device`` opens a file, a
function-local static's guard makes a raw futex call), and those parts import ``open`` and
``syscall`` for themselves. So at build time the judge also records what the objects it compiled
from the solution's sources reference (``record_own_imports``), and an import of the module
counts where those objects reference it; a module built with link flags of the solution's own
has no such record, and all its imports count. It stands in, on the cpu backend, for
the kernel record that sees such work on cuda.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from .verdict import Violation

RULE = "linked_symbols"

# ATen's per-backend entry points (ATen/ops/*_<namespace>_dispatch.h): an op's kernel called
# without the dispatcher. at::cpu and at::cuda also hold helpers (at::cpu::L1d_cache_size), so
# there only names of ATen ops count.
_BACKEND_NAMESPACES = ("cpu", "cuda", "mps", "xpu")
_COMPOSITE = re.compile(r"^(composite|sparse|quantized|nestedtensor|mkldnn)")
_OP_SUFFIX = re.compile(r"(_symint|_outf|_out)$")
# Below the dispatcher by other roads: its tables and kernel handles, and JIT operators.
_DISPATCHER = {("c10", "Dispatcher"), ("c10", "OperatorHandle"), ("c10", "KernelFunction"),
               ("c10", "BoxedKernel"), ("c10", "impl", "OperatorEntry"), ("torch", "jit")}
# Host BLAS, LAPACK and oneDNN, whichever library exports them.
_HOST_LIBRARY = re.compile(r"^(cblas_|LAPACKE_|mkl_|MKL_|dnnl_|openblas_|[sdcz](gemm|gemv|syrk|trsm|axpy|dot)_?$)")
# The means to find code at run time that no import names.
_LOOKUP = {
    **dict.fromkeys(("dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo",
                     "dl_iterate_phdr"), "looks up code at run time"),
    **dict.fromkeys(("open", "open64", "openat", "openat64", "fopen", "fopen64", "freopen", "creat",
                     "opendir", "readlink"), "opens files (a library's symbol table among them)"),
    **dict.fromkeys(("mmap", "mmap64", "mprotect", "pkey_mprotect", "memfd_create"), "maps memory"),
    **dict.fromkeys(("syscall", "ptrace", "process_vm_readv", "process_vm_writev"),
                    "makes raw system calls or reads other processes"),
}
_FILE_STREAMS = ("basic_ifstream", "basic_ofstream", "basic_fstream", "basic_filebuf")


# Beside a built module: the symbols its own objects reference (one per line).
OWN_IMPORTS = "own_imports.txt"


class LinkRecordError(RuntimeError):
    """The module's symbol table could not be read."""


def _undefined(path: Path, dynamic: bool) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        raise LinkRecordError("`nm` (GNU binutils, which links the extension) is not on PATH; install binutils")
    done = subprocess.run([nm, *(["-D"] if dynamic else []), "--undefined-only", str(path)], capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        raise LinkRecordError(f"nm could not read {path.name}: {done.stderr.strip()[:300]}")
    names = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] in ("U", "w", "v"):
            names.append(parts[-1].split("@", 1)[0])
    return names


def imported_symbols(module: Path) -> list[str]:
    """The undefined dynamic symbols of ``module``, mangled, without version suffixes."""
    return _undefined(module, dynamic=True)


def record_own_imports(objects: list[Path], module_dir: Path) -> None:
    """Write beside the module what the objects compiled from the solution reference."""
    names = sorted({name for obj in objects for name in _undefined(obj, dynamic=False)})
    (module_dir / OWN_IMPORTS).write_text("\n".join(names) + "\n")


def own_imports(module: Path) -> list[str]:
    """The module's imports that its own objects reference (all of them, where no record was made)."""
    imports = imported_symbols(module)
    record = module.parent / OWN_IMPORTS
    if not record.exists():
        return imports
    own = set(record.read_text().split())
    return [name for name in imports if name in own]


def nested_name(symbol: str) -> tuple[str, ...]:
    """The leading ``ns::...::name`` parts of an Itanium-mangled name (``_ZN2at3cpu2mmE...`` ->
    ``("at", "cpu", "mm")``); ``()`` for anything else. Template arguments end the parts."""
    if not symbol.startswith("_ZN"):
        return ()
    i, parts = 3, []
    while i < len(symbol) and symbol[i] in "KVrLO":  # cv- and ref-qualifiers of a method
        i += 1
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        length = int(symbol[i:j])
        parts.append(symbol[j:j + length])
        i = j + length
    return tuple(parts)


@lru_cache(maxsize=1)
def aten_op_names() -> frozenset[str]:
    """Every ATen operator's name, overloads dropped (``mm``, ``add_``, ...)."""
    import torch

    return frozenset(name.split("::", 1)[1].split(".", 1)[0]
                     for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::"))


def _is_op(name: str) -> bool:
    ops = aten_op_names()
    while name not in ops and _OP_SUFFIX.search(name):
        name = _OP_SUFFIX.sub("", name, count=1)
    return name in ops


def why_refused(symbol: str) -> str | None:
    """Why importing ``symbol`` leads to compute the op records cannot see; None if it does not."""
    if symbol in _LOOKUP:
        return _LOOKUP[symbol]
    if any(stream in symbol for stream in _FILE_STREAMS) and symbol.startswith("_Z"):
        return "opens files through C++ streams"
    if _HOST_LIBRARY.match(symbol):
        return "is a host BLAS/LAPACK/oneDNN routine"
    parts = nested_name(symbol)
    if len(parts) < 2:
        return None
    if parts[0] == "at":
        if parts[1] == "native":
            return "is ATen's kernel code, below the dispatcher"
        if len(parts) >= 4 and parts[1] == "_ops" and parts[3] == "redispatch":
            return "re-enters the dispatcher below its recording keys"
        if len(parts) >= 3 and (_COMPOSITE.match(parts[1]) or parts[1] in _BACKEND_NAMESPACES and _is_op(parts[2])):
            return "is an ATen op's kernel, called without the dispatcher"
    if any(parts[:len(prefix)] == prefix for prefix in _DISPATCHER):
        return "reaches the dispatcher's kernels directly"
    return None


def _readable(symbol: str) -> str:
    parts = nested_name(symbol)
    if parts:
        return "::".join(parts)
    return next((f"std::{stream}" for stream in _FILE_STREAMS if stream in symbol), symbol)


def linked_violations(module: Path, where: str = "cuda_extension") -> list[Violation]:
    """One violation per distinct reason the module's imports give, naming up to three imports."""
    found: dict[str, set[str]] = {}
    for symbol in own_imports(module):
        if reason := why_refused(symbol):
            found.setdefault(reason, set()).add(_readable(symbol))
    return [Violation(RULE, where, None, f"the built extension imports {', '.join(f'`{n}`' for n in sorted(names)[:3])}, "
                      f"which {reason}; the op records cannot see what it computes. Compute in your own "
                      "kernels, and call ATen only through torch::/at:: functions for allocation and views")
            for reason, names in sorted(found.items())]


def refusal(module: Path, backend: str) -> tuple[str, str, list[Violation]] | None:
    """The verdict's status, error and violations for a module whose imports lead to unseen
    compute (or whose imports cannot be read); None where they are all fine.

    The cpu backend only: there no other record sees compute below the dispatcher. On cuda every
    such road ends in GPU kernels, which the kernel record attributes (``unattributed_kernels``),
    and CUDA's static runtime, linked into every module, itself imports ``open``, ``fopen64`` and
    ``syscall``."""
    if backend != "cpu":
        return None
    try:
        found = linked_violations(module)
    except LinkRecordError as exc:
        return "setup_error", f"the judge could not read what the extension links to: {exc}", []
    if not found:
        return None
    return "forbidden", (f"{len(found)} violation(s) of the judge's rules in what the built extension "
                         "links to: " + "; ".join(v.message.split(";", 1)[0] for v in found[:3])), found
