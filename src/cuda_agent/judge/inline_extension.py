"""A single-file solution's ``load_inline`` call, built by the judge instead of the candidate.

KernelBench's single-file format builds its extension with
``torch.utils.cpp_extension.load_inline`` while ``model_new.py`` is imported. The candidate's
process may not run a compiler (its system-call filter refuses ``exec``), so its worker replaces
``load_inline`` with a stand-in that sends the call's arguments to the judge. The judge scans
those exact sources with the static rules, builds them with its own builder (in the compile
sandbox, with a precompiled ``torch/extension.h`` and the object cache, so the same source is
never compiled twice) and answers with a module file the stand-in imports. What is built is
exactly what was scanned, and the candidate's process never runs a compiler.

The files are made as ``load_inline`` makes them (``InlineCall.files``): the C++ sources joined into
``main.cpp`` after ``#include <torch/extension.h>``, with pybind11 bindings for ``functions``; the
CUDA sources joined into ``cuda.cu`` after the CUDA headers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

MAX_SOURCE_BYTES = 4 << 20   # every source of one call together
MAX_CALLS = 16               # builds one candidate process may ask for
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Compiler flags a call may add. Each names what it changes in the code generated, nothing about
# where the compiler reads or writes: include paths, forced includes, plugins, specs files,
# response files and output names stay the judge's.
_CXX_FLAG = re.compile(
    r"(-O[0-3sgz]?|-std=[a-z0-9+]+|-[DU][A-Za-z_][A-Za-z0-9_]*(=[^\s]*)?|-march=[a-z0-9_.-]+|-mtune=[a-z0-9_.-]+"
    r"|-m(no-)?[a-z0-9][a-z0-9.-]*|-f(no-)?(fast-math|openmp|openmp-simd|PIC|pic|unroll-loops|tree-vectorize|strict-aliasing"
    r"|omit-frame-pointer|finite-math-only|trapping-math|math-errno|vect-cost-model(=[a-z]+)?)"
    r"|-ffp-contract=(fast|on|off)|-W[A-Za-z0-9=-]*|-w|-g[0-3]?|-pthread)\Z")
_NVCC_FLAG = re.compile(
    r"(-O[0-3]|-std=[a-z0-9+]+|-[DU][A-Za-z_][A-Za-z0-9_]*(=[^\s]*)?|-?-use_fast_math|-lineinfo|--?expt-relaxed-constexpr"
    r"|--?expt-extended-lambda|-?-extra-device-vectorization|-Xptxas=[-A-Za-z0-9_=,.]+|--ptxas-options=[-A-Za-z0-9_=,.]+"
    r"|-?-maxrregcount=?[0-9]*|[0-9]+|-arch=(sm|compute)_[0-9]+[af]?|-gencode=?[-A-Za-z0-9_=,.]*"
    r"|--generate-code=[-A-Za-z0-9_=,.]+|arch=compute_[0-9]+[af]?,code=(sm|compute)_[0-9]+[af]?"
    r"|--?ftz=(true|false)|--?prec-(div|sqrt)=(true|false)|--?fmad=(true|false)|-res-usage|--resource-usage"
    r"|-w|-Wno-deprecated-gpu-targets|--?restrict)\Z")
_HOST_PASS = ("-Xcompiler", "--compiler-options")  # nvcc hands what follows to the host compiler
_PTXAS_PASS = ("-Xptxas", "--ptxas-options")
_PTXAS_FLAG = re.compile(r"(-v|--verbose|-O[0-3]|--?warn-on-spills|--?warn-on-local-memory-usage"
                         r"|--?allow-expensive-optimizations(=(true|false))?|-dlcm=[a-z]+|--?maxrregcount=?[0-9]*"
                         r"|[0-9]+)(,.*)?\Z")


class InlineCallError(ValueError):
    """The arguments of a load_inline call the judge cannot build, and why."""


@dataclass(frozen=True)
class InlineCall:
    """One ``load_inline`` call's arguments, normalised as ``load_inline`` normalises them."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] | None = None   # (name, docstring)
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False

    # -- from the call, in the candidate's process ---------------------------------------------
    @classmethod
    def from_arguments(cls, name: Any, cpp_sources: Any, cuda_sources: Any = None, sycl_sources: Any = None,
                       functions: Any = None, extra_cflags: Any = None, extra_cuda_cflags: Any = None,
                       extra_sycl_cflags: Any = None, extra_ldflags: Any = None, extra_include_paths: Any = None,
                       build_directory: Any = None, verbose: Any = False, with_cuda: Any = None,
                       with_sycl: Any = None, is_python_module: Any = True, with_pytorch_error_handling: Any = True,
                       keep_intermediates: Any = True, use_pch: Any = False,
                       no_implicit_headers: Any = False) -> "InlineCall":
        """load_inline's own signature; raises InlineCallError for what the judge does not build."""
        if sycl_sources or extra_sycl_cflags or with_sycl:
            raise InlineCallError("SYCL sources are not built here; write C++ or CUDA")
        if extra_include_paths:
            raise InlineCallError("extra_include_paths brings in headers from outside the solution; use only "
                                  "the system CUDA and torch headers")
        if is_python_module is not True:
            raise InlineCallError("load_inline must build a Python module (is_python_module=True)")
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, (list, tuple)):
            functions = {f: f for f in functions}
        if functions is not None and not isinstance(functions, dict):
            raise InlineCallError(f"functions must be a list or a dict, not {type(functions).__name__}")
        return cls(name=name, cpp_sources=_strings(cpp_sources, "cpp_sources"),
                   cuda_sources=_strings(cuda_sources, "cuda_sources"),
                   functions=None if functions is None else tuple(functions.items()),
                   extra_cflags=_strings(extra_cflags, "extra_cflags"),
                   extra_cuda_cflags=_strings(extra_cuda_cflags, "extra_cuda_cflags"),
                   extra_ldflags=_strings(extra_ldflags, "extra_ldflags"),
                   with_pytorch_error_handling=bool(with_pytorch_error_handling),
                   no_implicit_headers=bool(no_implicit_headers)).checked()

    # -- over the channel --------------------------------------------------------------------
    def to_message(self) -> dict:
        return asdict(self)

    @classmethod
    def from_message(cls, message: Any) -> "InlineCall":
        """The call a (hostile) candidate process sent; raises InlineCallError if malformed."""
        if not isinstance(message, dict) or set(message) != set(cls.__dataclass_fields__):
            raise InlineCallError("a malformed load_inline request")
        functions = message["functions"]
        if functions is not None:
            if not isinstance(functions, (list, tuple)) or not all(
                    isinstance(p, (list, tuple)) and len(p) == 2 for p in functions):
                raise InlineCallError("a malformed load_inline request (functions)")
            functions = tuple((p[0], p[1]) for p in functions)
        for flag in ("with_pytorch_error_handling", "no_implicit_headers"):
            if not isinstance(message[flag], bool):
                raise InlineCallError(f"a malformed load_inline request ({flag})")
        return cls(name=message["name"], functions=functions,
                   with_pytorch_error_handling=message["with_pytorch_error_handling"],
                   no_implicit_headers=message["no_implicit_headers"],
                   **{k: _strings(message[k], k) for k in ("cpp_sources", "cuda_sources", "extra_cflags",
                                                           "extra_cuda_cflags", "extra_ldflags")}).checked()

    def checked(self) -> "InlineCall":
        if not isinstance(self.name, str) or not _IDENTIFIER.match(self.name):
            raise InlineCallError(f"load_inline's name must be a Python identifier, not {self.name!r}")
        for function, doc in self.functions or ():
            if not (isinstance(function, str) and _IDENTIFIER.match(function)) or not isinstance(doc, str):
                raise InlineCallError(f"load_inline's functions must name C++ functions, not {function!r}")
            if '"' in doc or "\\" in doc or "\n" in doc:
                raise InlineCallError(f"the docstring of {function} may not hold quotes, backslashes or newlines")
        size = sum(len(s.encode()) for s in self.cpp_sources + self.cuda_sources)
        if size > MAX_SOURCE_BYTES:
            raise InlineCallError(f"load_inline's sources are {size} bytes; at most {MAX_SOURCE_BYTES} are built")
        return self

    # -- what is built -----------------------------------------------------------------------
    def files(self) -> dict[str, str]:
        """main.cpp (and cuda.cu), as load_inline writes them."""
        cpp = list(self.cpp_sources)
        if not self.no_implicit_headers:
            cpp.insert(0, "#include <torch/extension.h>")
        if self.functions is not None:
            cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            for function, doc in self.functions:
                bound = f"torch::wrap_pybind_function({function})" if self.with_pytorch_error_handling else function
                cpp.append(f'm.def("{function}", {bound}, "{doc}");')
            cpp.append("}")
        files = {"main.cpp": "\n".join(cpp)}
        if self.cuda_sources:
            cuda = list(self.cuda_sources)
            if not self.no_implicit_headers:
                cuda[:0] = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
            files["cuda.cu"] = "\n".join(cuda)
        return files

    def sources(self) -> dict[str, str]:
        """The call's own code, joined as in ``files`` but without what load_inline adds (headers
        and the bindings of ``functions``, made from checked identifiers): what the rules read.
        A ``-DNAME=VALUE`` flag is code too (``-DF=at::relu`` turns ``F(x)`` into an ATen call),
        so each comes first, as the ``#define`` it is."""
        sources = {"main.cpp": _defines(self.extra_cflags, nvcc=False) + "\n".join(self.cpp_sources)}
        if self.cuda_sources:
            sources["cuda.cu"] = _defines(self.extra_cuda_cflags, nvcc=True) + "\n".join(self.cuda_sources)
        return sources

    def flag_problems(self) -> list[str]:
        """Compiler flags the judge does not pass on, each with why (linking is the static rules')."""
        problems = [f"`{flag}` in extra_cflags" for flag in _words(self.extra_cflags) if not _CXX_FLAG.match(flag)]
        words, host, ptxas = _words(self.extra_cuda_cflags), False, False
        for word in words:
            if host:  # the word after a bare -Xcompiler
                ok, host = _host_flags_ok(word), False
            elif ptxas:
                ok, ptxas = all(_PTXAS_FLAG.match(p) for p in word.split(",") if p), False
            elif word in _HOST_PASS:
                ok, host = True, True
            elif word in _PTXAS_PASS:
                ok, ptxas = True, True
            elif word.startswith(_HOST_PASS):
                ok = _host_flags_ok(word.split("=", 1)[1] if "=" in word else "")
            else:
                ok = bool(_NVCC_FLAG.match(word))
            if not ok:
                problems.append(f"`{word}` in extra_cuda_cflags")
        return problems


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InlineCallError(f"load_inline's {what} must be a string or a list of strings")


def _defines(flags: tuple[str, ...], nvcc: bool) -> str:
    """The macros ``-D`` flags define, as the lines a compiler reads them as: nvcc's own (a
    comma-separated list each) and those it hands the host compiler (``-Xcompiler -DF=...``,
    ``--compiler-options=-DA,-DB``) as well."""
    definitions, host = [], False
    for word in _words(flags):
        if host:  # the word after a bare -Xcompiler
            words, host = word.split(","), False
        elif nvcc and word in _HOST_PASS:
            words, host = [], True
        elif nvcc and word.startswith(_HOST_PASS):
            words = word.split("=", 1)[1].split(",") if "=" in word else []
        else:
            words = [word]
            if nvcc and word.startswith("-D"):
                definitions += word[2:].split(",")
                continue
        definitions += [w[2:] for w in words if w.startswith("-D")]
    lines = []
    for definition in definitions:
        if definition:
            name, _, value = definition.partition("=")
            lines.append(f"#define {name} {value or '1'}\n")
    return "".join(lines)


def _words(flags: tuple[str, ...]) -> list[str]:
    return [word for flag in flags for word in flag.strip().split()]


def _host_flags_ok(flags: str) -> bool:
    """Host-compiler flags passed through nvcc (``-O3,-fopenmp``): each one the C++ rule allows."""
    parts = [part for part in flags.split(",") if part]
    return bool(parts) and all(_CXX_FLAG.match(part) for part in parts)
