"""The C/C++/CUDA checks: token-level rules over every kernel source and every source embedded in
a ``load_inline`` call.

Comments and literals are out of the way before any rule looks (see ``cpp_lex``): a comment that
mentions ``at::matmul`` is not code, ``"at::matmul"`` in a message is not a call. Object-like
macros are expanded at their uses (``#define NS at`` then ``NS::matmul``), macro bodies are
scanned as code, namespace aliases (``namespace A = at;``) are followed, and token pasting
(``##``) is refused outright, since it builds names no scan can see.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from . import vocab
from .cpp_lex import INCLUDE_DIRECTIVES, Include, Lexed, Token, lex
from .report import Report
from .task_ops import TaskOps

# Directive lines whose words are not code (or, for includes, are checked on their own).
_SKIPPED_DIRECTIVES = INCLUDE_DIRECTIVES | {"error", "warning", "line", "define-name", "define-params",
                                           "ident", "sccs"}
_TORCH_HEADS = frozenset({"at", "torch", "c10", "caffe2"})
_PY_CAPI = re.compile(r"^(?:_?Py[A-Z][A-Za-z]*_[A-Za-z]\w*|_?Py_\w+|PyFrameObject|PyThreadState|"
                      r"PyInterpreterState|PyCodeObject|PyObject|PyTypeObject)$")
_K_CONSTANT = re.compile(r"^k[A-Z0-9]")
# at::Context setters of global numerics, present and future spellings.
_NUMERICS_SETTER = re.compile(r"^set(?:AllowTF32|Deterministic|Benchmark|Float32Matmul|AllowFP16Reduction|"
                              r"AllowBF16Reduction|FlushDenormal|UserEnabled|SDPUse|BlasPreferred|"
                              r"AllowFP16Accumulation|ROCmFA|LinalgPreferred)")
_MAX_EXPANDED = 200_000
# Member functions that are also cooperative-groups warp votes (tile.any(p), tile.all(p)).
_CPP_MEMBER_AMBIGUOUS = frozenset({"any", "all"})
_ASM_KEYWORDS = frozenset({"asm", "__asm__", "__asm"})
_ASM_ESCAPES = ("syscall", "sysenter", "int $0x80", "int 0x80", "int $128")
_SPECIFIERS = frozenset({
    "const", "volatile", "noexcept", "override", "final", "mutable", "constexpr", "&", "&&",
    "throw", "try", "requires",
})


@dataclass(frozen=True)
class CppSource:
    """One C/C++/CUDA text to scan. ``lines`` maps its lines to the lines of the file named
    ``file`` (for a source embedded in model_new.py); None when it is the file itself."""

    file: str
    text: str
    lines: tuple[int, ...] | None = None


# ------------------------------------------------------------------------------------------
# facts about all sources together
# ------------------------------------------------------------------------------------------
@dataclass
class _Facts:
    stream_join: bool = False
    thread_join: bool = False
    pthread_join: bool = False
    std_thread: bool = False
    defined: frozenset[str] = frozenset()


def _matching_parens(tokens: list[Token]) -> dict[int, int]:
    """Index of each '(' mapped to the index of its ')', in one pass."""
    close: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(tokens):
        if t.text == "(":
            stack.append(i)
        elif t.text == ")" and stack:
            close[stack.pop()] = i
    return close


def _defined_functions(tokens: list[Token]) -> set[str]:
    """Names of functions the sources define (with a body), so a local ``write()`` is not libc's."""
    found: set[str] = set()
    n = len(tokens)
    close = _matching_parens(tokens)
    for i in range(1, n - 1):
        t = tokens[i]
        if t.kind != "id" or tokens[i + 1].text != "(" or t.directive:
            continue
        prev = tokens[i - 1]
        if prev.kind == "id":
            if prev.text in vocab.CPP_NOT_DECLARATORS:
                continue
        elif not (prev.kind == "op" and prev.text in ("*", "&", "&&", ">", "~", "::")):
            continue
        j = close.get(i + 1)
        if j is None:
            continue
        j += 1
        # skip qualifiers (const, noexcept, __attribute__((...)), ...) up to the body
        for _ in range(16):
            if j >= n:
                break
            text = tokens[j].text
            if text.startswith("__") and j + 1 < n and tokens[j + 1].text == "(" and j + 1 in close:
                j = close[j + 1] + 1
            elif text in _SPECIFIERS or text.startswith("__"):
                j += 1
            elif text == "->":   # trailing return type
                k = j
                while k < n and k < j + 64 and tokens[k].text not in ("{", ";"):
                    k += 1
                j = k
            else:
                break
        if j < n and tokens[j].text in ("{", ":"):
            found.add(t.text)
    # lambdas bound to a name: auto name = [...](...) {...}
    for i in range(1, n - 2):
        if (tokens[i].kind == "id" and tokens[i - 1].text == "auto" and tokens[i + 1].text == "="
                and tokens[i + 2].text == "["):
            found.add(tokens[i].text)
    return found


def _collect_facts(lexed: list[Lexed]) -> _Facts:
    facts = _Facts()
    defined: set[str] = set()
    for lx in lexed:
        toks = lx.tokens
        for i, t in enumerate(toks):
            if t.kind != "id":
                continue
            if t.text in vocab.STREAM_JOIN:
                facts.stream_join = True
            elif t.text == "pthread_join":
                facts.pthread_join = True
            elif t.text == "join" and i and toks[i - 1].text in (".", "->"):
                facts.thread_join = True
            elif (t.text == "thread" and i >= 2 and toks[i - 1].text == "::" and toks[i - 2].text == "std"
                  and not (i + 1 < len(toks) and toks[i + 1].text == "::")):
                facts.std_thread = True
        defined |= _defined_functions(toks)
    facts.defined = frozenset(defined)
    return facts


# ------------------------------------------------------------------------------------------
# classification of qualified names
# ------------------------------------------------------------------------------------------
_TORCH_ALLOWED_MSG = ("in C++, torch:: and at:: may only allocate (torch::empty, torch::empty_like), "
                      "read metadata (sizes, strides, dtype, device, data_ptr), check (TORCH_CHECK) and "
                      "get the current stream: do this computation in your own kernel")


def classify_torch_chain(parts: list[str]) -> tuple[str, str] | None:
    """The rule broken by a ``torch::`` / ``at::`` / ``c10::`` name, or None if it is allowed."""
    text = "::".join(parts)
    rest = parts[1:]
    if not rest:
        return None
    for p in rest:
        if p in vocab.TORCH_CPP_INTROSPECTION:
            return ("introspection", f"`{text}` reaches PyTorch's interpreter and dispatcher internals; "
                                     "kernels and bindings need none of them")
    for p in rest:
        if p in vocab.TORCH_CPP_NUMERICS:
            return ("numerics_flags", f"`{text}` changes PyTorch's global numerics or random state; "
                                      "leave global settings alone")
        if p in vocab.TORCH_CPP_CONCURRENCY:
            return ("concurrency", f"`{text}` changes PyTorch's threads or current stream; run on the "
                                   "current stream (getCurrentCUDAStream) with the judge's thread count")
        if p in vocab.STREAM_POOL:
            return ("stream-pool", text)
        if p in vocab.TORCH_CPP_DISPATCH:
            if p in ("RegisterOperators", "Library"):
                return ("monkeypatch", f"`{text}` registers PyTorch operators; bindings only register "
                                       "functions with REGISTER_BINDING")
            return ("torch_compute", f"`{text}` runs PyTorch operators; {_TORCH_ALLOWED_MSG}")
        if p in ("getCurrentCUDASparseHandle", "getCurrentCUDASolverDnHandle"):
            return ("library_use", f"`{text}` is a cuSPARSE/cuSOLVER handle; only cuBLAS (for matrix "
                                   "products) and cuDNN (for convolutions) are allowed")
    if any(p in vocab.TORCH_CPP_COMPUTE_NAMESPACES for p in rest):
        return ("torch_compute", f"`{text}` is PyTorch compute; {_TORCH_ALLOWED_MSG}")
    if parts[0] in ("c10", "caffe2"):
        return None
    last = rest[-1]
    if any(p[:1].isupper() for p in rest[:-1]):
        # scoped in a type: at::ScalarType::Float is fine, at::Tensor::matmul is not
        if vocab.is_compute_method(last):
            return ("torch_compute", f"`{text}` is a PyTorch compute method; {_TORCH_ALLOWED_MSG}")
        return None
    if last[:1].isupper() or _K_CONSTANT.match(last):
        return None
    path = "::".join(rest)
    if path in vocab.TORCH_CPP_ALLOWED or (len(rest) == 1 and last in vocab.TORCH_CPP_ALLOWED):
        return None
    if last in ("acc_type", "opmath_type") or (len(rest) == 1 and last in ("cuda", "indexing", "detail")):
        return None
    if rest[0] == "indexing":
        return None
    return ("torch_compute", f"`{text}` is PyTorch compute; {_TORCH_ALLOWED_MSG}")


def _classify_chain(parts: list[str], facts: _Facts) -> tuple[str, str] | None:
    head = parts[0]
    text = "::".join(parts)
    if head in _TORCH_HEADS:
        found = classify_torch_chain(parts)
        if found and found[0] == "stream-pool":
            if facts.stream_join:
                return None
            return ("unjoined_stream", f"`{text}` takes a stream that the sources never synchronise "
                                       "with; launch on the current stream, or make it wait "
                                       "(cudaStreamWaitEvent) before returning")
        return found
    if head == "thrust":
        if len(parts) >= 2 and parts[1] in vocab.THRUST_ALLOWED:
            return None
        return ("library_use", f"`{text}` is a Thrust algorithm or container; write the computation "
                               "in your own kernel (thrust::complex and thrust::pair are fine)")
    if head == "cub":
        if any(p.startswith("Device") for p in parts[1:]):
            return ("library_use", f"`{text}` is a device-wide CUB algorithm; only block- and warp-level "
                                   "primitives (cub::BlockReduce, cub::WarpReduce, ...) inside your own "
                                   "kernel are allowed")
        return None
    if head in vocab.CPP_LIBRARY_NAMESPACES:
        return ("library_use", f"`{text}` is from {vocab.CPP_LIBRARY_NAMESPACES[head]}, a compute "
                               "library; write the kernel yourself (only cuBLAS for matrix products "
                               "and cuDNN for convolutions are allowed)")
    if head == "std" and len(parts) >= 2:
        second = parts[1]
        if second == "thread" and len(parts) == 2:
            if facts.thread_join:
                return None
            return ("unjoined_stream", "`std::thread` is started but never joined; finish all work "
                                       "before returning (OpenMP or a joined thread)")
        if second == "async":
            return ("concurrency", "`std::async` runs work on another thread; do the work in the call")
        if second == "execution":
            return ("concurrency", "parallel standard algorithms start threads the judge does not "
                                   "control; use OpenMP loops or your own kernel")
        if second in ("filesystem", "experimental"):
            return ("io_access", f"`{text}` reaches the file system; solutions may not touch files")
    if head in ("pybind11", "py"):
        if "import" in parts[1:] or "globals" in parts[1:] or "module_import" in parts[1:]:
            return ("introspection", f"`{text}` reaches into Python from C++; bindings only register "
                                     "functions with REGISTER_BINDING")
        if any(p in ("eval", "exec", "eval_file") for p in parts[1:]):
            return ("dynamic_code", f"`{text}` runs Python code from C++; not allowed")
    return None


def _include_rule(inc: Include, file: str, ops: TaskOps, backend: str) -> tuple[str, str] | None:
    header = inc.header.replace("\\", "/")
    low = header.lower()
    base = low.rsplit("/", 1)[-1]
    cuda = backend == "cuda"
    if inc.computed:
        return ("dynamic_code", f"`#{inc.directive} {header}` takes its header from a macro, which hides what "
                                "it includes; name headers literally")
    if inc.directive == "embed":
        return ("io_access", "#embed reads a file into the source; put what you need in the sources")
    if header.startswith("/") or re.match(r"^[A-Za-z]:", header):
        return ("io_access", f"`#include {header}` includes a file from outside the solution; "
                             "include only system/CUDA/torch headers and your own kernels/ headers")
    if not inc.angled and ".." in header.split("/"):
        here = posixpath.dirname(file) if "/" in file else ""
        target = posixpath.normpath(posixpath.join(here, header))
        if not (target.startswith("kernels/") or target in ("binding_registry.h", "binding_pch.h")):
            return ("io_access", f"`#include \"{header}\"` reaches outside kernels/; include only your "
                                 "own headers under kernels/ and \"../binding_registry.h\"")
    if base.startswith("cublas"):
        if cuda and ops.allows_cublas:
            return None
        return ("library_use", _cublas_refusal(header, cuda))
    if base.startswith("cudnn"):
        if "frontend" in base or "backend" in base:
            return ("library_use", "the cuDNN frontend/backend (graph) API can run any fused op; use "
                                   "cuDNN's convolution API (cudnnConvolutionForward and its descriptors)")
        if cuda and ops.allows_cudnn:
            return None
        return ("library_use", _cudnn_refusal(header, cuda))
    for prefix, what in (("cufft", "cuFFT"), ("curand", "cuRAND"), ("cusparse", "cuSPARSE"),
                         ("cusolver", "cuSOLVER"), ("nccl", "NCCL"), ("cutensor", "cuTENSOR"),
                         ("nvshmem", "NVSHMEM"), ("npp", "NPP"), ("nvjpeg", "nvJPEG"),
                         ("cblas", "CBLAS"), ("mkl", "MKL"), ("lapacke", "LAPACK"),
                         ("openblas", "OpenBLAS"), ("fftw3", "FFTW"), ("dnnl", "oneDNN"),
                         ("mkldnn", "oneDNN")):
        if base.startswith(prefix):
            return ("library_use", f"`{header}` is {what}, a compute library; only cuBLAS (matrix "
                                   "products) and cuDNN (convolutions) are allowed")
    for prefix, what in (("cutlass/", "CUTLASS"), ("cute/", "CuTe (CUTLASS)"), ("eigen/", "Eigen"),
                         ("eigen3/", "Eigen"), ("unsupported/eigen", "Eigen"), ("oneapi/", "oneAPI"),
                         ("tbb/", "oneTBB"), ("mkl/", "MKL"), ("cudnn_frontend", "the cuDNN frontend"),
                         ("flashinfer", "FlashInfer"), ("cufftdx", "cuFFTDx"), ("cublasdx", "cuBLASDx"),
                         ("ck/", "Composable Kernel"), ("tl_templates", "TileLang")):
        if low.startswith(prefix):
            return ("library_use", f"`{header}` is {what}, a compute library; write the kernel yourself "
                                   "(only cuBLAS for matrix products and cuDNN for convolutions are allowed)")
    if low.startswith(("aten/native", "aten/ops/", "aten/cudnn/", "aten/miopen/", "aten/mkldnn/",
                       "aten/cuda/cudablas", "aten/cuda/tunable", "aten/functorch", "aten/cpu/")):
        return ("library_use", f"`{header}` is ATen's own kernels; include only <torch/types.h>, "
                               "<torch/extension.h>, <ATen/ATen.h>, <ATen/cuda/CUDAContext.h>, "
                               "<c10/cuda/CUDAGuard.h>, <c10/cuda/CUDAStream.h> and the like")
    if base.startswith("nvrtc"):
        return ("dynamic_code", "NVRTC compiles code at runtime; write every kernel in the sources")
    if base.startswith("cufile"):
        return ("io_access", "cuFile reads and writes files; solutions may not touch files")
    if low.startswith(("torch/csrc/jit", "c10/core/impl/", "torch/csrc/autograd/python", "torch/csrc/dynamo")) \
            or low == "torch/script.h" or header in ("Python.h", "frameobject.h"):
        return ("introspection", f"`{header}` reaches PyTorch's or Python's internals; bindings need "
                                 "only <torch/types.h> and \"../binding_registry.h\"")
    if low == "torch/library.h":
        return ("monkeypatch", "<torch/library.h> registers and overrides PyTorch operators; bindings "
                               "only register functions with REGISTER_BINDING")
    if low in ("dlfcn.h", "sys/ptrace.h", "link.h"):
        return ("native_access", f"<{header}> loads or inspects native code directly; not allowed")
    if low in ("fstream", "filesystem", "experimental/filesystem", "sys/socket.h", "netdb.h",
               "arpa/inet.h", "dirent.h", "fcntl.h", "sys/inotify.h", "curl/curl.h") or low.startswith("netinet/"):
        return ("io_access", f"<{header}> is for files, sockets or the network; solutions may not use them")
    if low in ("execution", "spawn.h"):
        return ("concurrency", f"<{header}> starts threads or processes the judge does not control")
    return None


def _cublas_refusal(what: str, cuda: bool) -> str:
    if not cuda:
        return f"`{what}` is cuBLAS; the cpu backend allows no libraries: write the loops yourself"
    return (f"`{what}` is cuBLAS, allowed only when the task multiplies matrices (matmul, bmm, "
            "nn.Linear, ...) or convolves, and this task does neither: write the kernel yourself")


def _cudnn_refusal(what: str, cuda: bool) -> str:
    if not cuda:
        return f"`{what}` is cuDNN; the cpu backend allows no libraries: write the loops yourself"
    return (f"`{what}` is cuDNN, allowed only when the task has a convolution (nn.Conv*, "
            "F.conv*), and this task has none: write the kernel yourself")


def _cublas_allowed(name: str) -> bool:
    low = name.lower()
    if "gemm" in low or name in vocab.CUBLAS_SETUP:
        return True
    if name.startswith("cublasLt") and ("Matmul" in name or name.startswith("cublasLtMatrixLayout")):
        return True
    return False


def _cudnn_allowed(name: str) -> bool:
    if name.startswith("cudnnBackend"):
        return False
    if "Convolution" in name or name in vocab.CUDNN_SETUP:
        return True
    if name.startswith(("cudnnCreate", "cudnnDestroy", "cudnnSet", "cudnnGet")) and "Descriptor" in name:
        return True
    return False


# ------------------------------------------------------------------------------------------
# one source
# ------------------------------------------------------------------------------------------
def _expand(lx: Lexed) -> list[Token]:
    """The tokens with object-like macros replaced by their bodies at each use (use-site lines)."""
    macros = {n: m for n, m in lx.macros.items() if m.params is None and m.body}
    if not macros:
        return lx.tokens
    out: list[Token] = []

    def emit(name: str, line: int, seen: frozenset[str], depth: int) -> None:
        for b in macros[name].body:
            if len(out) > _MAX_EXPANDED:
                return
            if b.kind == "id" and b.text in macros and b.text not in seen and depth < 8:
                emit(b.text, line, seen | {b.text}, depth + 1)
            else:
                out.append(Token(b.kind, b.text, line, ""))

    for t in lx.tokens:
        if t.kind == "id" and not t.directive and t.text in macros and len(out) <= _MAX_EXPANDED:
            emit(t.text, t.line, frozenset({t.text}), 0)
        else:
            out.append(t)
    return out


def _lowers_precision(toks: list[Token], i: int) -> bool:
    """``x.half()``, ``x.to(torch::kBFloat16)``, ``x.to(x.options().dtype(at::kHalf))``."""
    name = toks[i].text
    if name in ("half", "bfloat16"):
        return True
    if name not in ("to", "toType", "type"):
        return False
    depth = 0
    for j in range(i + 1, min(len(toks), i + 200)):
        text = toks[j].text
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return False
        elif toks[j].kind == "id" and text in vocab.LOW_PRECISION_CPP:
            return True
    return False


def _chain(toks: list[Token], i: int) -> tuple[list[str], int]:
    parts = [toks[i].text]
    j = i
    n = len(toks)
    while j + 2 < n and toks[j + 1].text == "::" and toks[j + 2].kind == "id":
        parts.append(toks[j + 2].text)
        j += 2
    return parts, j


class _FileScan:
    def __init__(self, src: CppSource, lx: Lexed, facts: _Facts, ops: TaskOps, backend: str,
                 report: Report):
        self.src, self.lx, self.facts, self.ops, self.backend, self.report = src, lx, facts, ops, backend, report

    def line(self, line: int) -> int:
        lines = self.src.lines
        if not lines:
            return line
        return lines[min(max(line, 1), len(lines)) - 1]

    def add(self, rule: str, line: int, message: str) -> None:
        self.report.add(rule, self.src.file, self.line(line), message)

    def run(self) -> None:
        for inc in self.lx.includes:
            found = _include_rule(inc, self.src.file, self.ops, self.backend)
            if found:
                self.add(found[0], inc.line, found[1])
        self._macro_params()
        toks = _expand(self.lx)
        aliases, using = self._namespaces(toks)
        using_torch = any(u and u[0] in ("at", "torch") and len(u) == 1 for u in using)
        using_std = any(u == ["std"] for u in using)
        n = len(toks)
        cuda = self.backend == "cuda"
        for i, t in enumerate(toks):
            if t.directive in _SKIPPED_DIRECTIVES:
                continue
            if t.kind == "op":
                if t.text == "##":
                    self.add("dynamic_code", t.line, "token pasting (`##`) builds identifiers no check can "
                                                     "see; write every name out in full")
                elif t.text == "\\":
                    self.add("dynamic_code", t.line, "a backslash in code (a universal character name in an "
                                                     "identifier) hides what a name is; write names in ASCII")
                continue
            if t.kind == "str":
                if "/proc/" in t.text or "/dev/mem" in t.text:
                    self.add("native_access", t.line, "reads /proc or /dev/mem: the process's memory and "
                                                      "state are off limits")
                opener = toks[i - 2].text if i >= 2 and toks[i - 1].text == "(" else ""
                if opener == "_Pragma" and "num_threads" in t.text:
                    self.add("concurrency", t.line, "`num_threads(...)` overrides the thread count the judge "
                                                    "sets; leave it to OMP_NUM_THREADS")
                if any(k in t.text for k in _ASM_ESCAPES) and self._in_asm(toks, i):
                    self.add("native_access", t.line, "inline assembly that makes system calls; not allowed")
                continue
            if t.kind != "id":
                continue
            name = t.text
            prev = toks[i - 1] if i else None
            nxt = toks[i + 1] if i + 1 < n else None
            called = nxt is not None and nxt.text == "("
            member = prev is not None and prev.kind == "op" and prev.text in (".", "->")
            scoped = prev is not None and prev.text == "::"
            qualifier = toks[i - 2] if scoped and i >= 2 else None

            rule = vocab.CPP_NAME_RULES.get(name)
            if rule is None and _NUMERICS_SETTER.match(name):
                rule = ("numerics_flags", "changes global numerics settings")
            if member:
                if rule and rule[0] == "numerics_flags":
                    self.add(rule[0], t.line, f"`{name}` {rule[1]}; leave global settings alone")
                if called and vocab.is_compute_method(name) and name not in _CPP_MEMBER_AMBIGUOUS:
                    self.add("torch_compute", t.line,
                             f"`.{name}()` computes with PyTorch; in C++ only allocation, views and metadata "
                             "(empty, view, reshape, size, stride, data_ptr, ...) are allowed: compute it "
                             "in your own kernel")
                if called and _lowers_precision(toks, i):
                    self.add("torch_compute", t.line,
                             f"`.{name}(...)` casts to a lower precision with PyTorch, trading accuracy for "
                             "speed; keep the task's dtype (convert inside your kernel if you must)")
                if name == "detach" and called and self.facts.std_thread:
                    self.add("unjoined_stream", t.line, "a detached thread outlives the call; join every "
                                                        "thread before returning")
                continue

            # qualified names, from their first component
            head = not scoped or qualifier is None or qualifier.kind != "id"
            if head and not (scoped and qualifier is not None and qualifier.text == ">"):
                parts, _ = _chain(toks, i)
                if parts[0] in aliases:
                    parts = aliases[parts[0]] + parts[1:]
                found = _classify_chain(parts, self.facts)
                if found is None and len(parts) == 1 and not scoped:
                    if using_torch and called and name in vocab.UNQUALIFIED_ATEN_COMPUTE \
                            and name not in self.facts.defined:
                        found = ("torch_compute", f"`{name}` here is ATen's (after `using namespace`); "
                                                  f"{_TORCH_ALLOWED_MSG}")
                    elif using_std and name in ("thread", "async", "execution"):
                        found = _classify_chain(["std", name], self.facts)
                if found:
                    self.add(found[0], t.line, found[1])

            if rule:
                self.add(rule[0], t.line, f"`{name}` {rule[1]}; not allowed in a solution")
            call_rule = vocab.CPP_CALL_RULES.get(name)
            address_taken = prev is not None and prev.text == "&" and not called
            if call_rule and (called or address_taken):
                if not scoped:
                    libc = name not in self.facts.defined      # unless the sources define it
                else:                                          # ::name() or std::name()
                    libc = qualifier is None or qualifier.kind != "id" or qualifier.text == "std"
                if libc:
                    self.add(call_rule[0], t.line, f"`{name}()` {call_rule[1]}; not allowed in a solution")

            if name in vocab.STREAM_CREATE and not self.facts.stream_join:
                self.add("unjoined_stream", t.line,
                         f"`{name}` creates a stream the sources never synchronise with "
                         "(cudaStreamSynchronize, cudaStreamWaitEvent, cudaEventSynchronize or "
                         "cudaDeviceSynchronize); launch on the current stream instead")
            elif name == "pthread_create" and not self.facts.pthread_join:
                self.add("concurrency", t.line, "`pthread_create` starts a thread that is never joined; "
                                                "use OpenMP loops, or join every thread before returning")
            elif name == "num_threads" and t.directive == "pragma":
                self.add("concurrency", t.line, "`num_threads(...)` overrides the thread count the judge "
                                                "sets; leave it to OMP_NUM_THREADS")
            elif name.startswith("cublas"):
                if not (cuda and self.ops.allows_cublas):
                    self.add("library_use", t.line, _cublas_refusal(name, cuda))
                elif not name.endswith("_t") and not _cublas_allowed(name):
                    self.add("library_use", t.line,
                             f"`{name}` is not a cuBLAS GEMM call; cuBLAS is allowed only through its GEMM "
                             "API (cublas*gemm*, cublasGemmEx, cublasLtMatmul) and handle/stream/workspace "
                             "setup: write the rest in your own kernel")
            elif name.startswith("cudnn"):
                if not (cuda and self.ops.allows_cudnn):
                    self.add("library_use", t.line, _cudnn_refusal(name, cuda))
                elif not name.endswith("_t") and not _cudnn_allowed(name):
                    self.add("library_use", t.line,
                             f"`{name}` is not part of cuDNN's convolution API; cuDNN is allowed only for "
                             "convolutions (cudnnConvolution*, descriptors, cudnnAddTensor for the bias): "
                             "write the rest in your own kernel")
            elif name.startswith("nvrtc"):
                self.add("dynamic_code", t.line, f"`{name}` compiles code at runtime (NVRTC); write every "
                                                 "kernel in the sources")
            elif _PY_CAPI.match(name):
                self.add("introspection", t.line, f"`{name}` is the CPython C API; bindings are generated "
                                                  "by the judge and need none of it")
            else:
                for prefix, what in vocab.CPP_LIBRARY_PREFIXES:
                    if name.startswith(prefix):
                        self.add("library_use", t.line, f"`{name}` is from {what}, a compute library; only "
                                                        "cuBLAS (matrix products) and cuDNN (convolutions) "
                                                        "are allowed")
                        break

    @staticmethod
    def _in_asm(toks: list[Token], i: int) -> bool:
        for j in range(i - 1, max(i - 6, -1), -1):
            if toks[j].text in _ASM_KEYWORDS:
                return True
        return False

    def _namespaces(self, toks: list[Token]) -> tuple[dict[str, list[str]], list[list[str]]]:
        aliases: dict[str, list[str]] = {}
        using: list[list[str]] = []
        n = len(toks)
        for i, t in enumerate(toks):
            if t.kind != "id":
                continue
            if t.text == "namespace" and i + 3 < n and toks[i + 1].kind == "id" and toks[i + 2].text == "=":
                j = i + 3 + (toks[i + 3].text == "::")
                if j < n and toks[j].kind == "id":
                    parts, _ = _chain(toks, j)
                    if parts[0] in aliases and parts[0] != toks[i + 1].text:
                        parts = aliases[parts[0]] + parts[1:]
                    aliases[toks[i + 1].text] = parts
            elif t.text == "using" and i + 2 < n and toks[i + 1].text == "namespace":
                j = i + 2 + (toks[i + 2].text == "::")
                if j < n and toks[j].kind == "id":
                    parts, _ = _chain(toks, j)
                    if parts[0] in aliases:
                        parts = aliases[parts[0]] + parts[1:]
                    using.append(parts)
        return aliases, using

    def _macro_params(self) -> None:
        """A function-like macro that builds a qualified name from its arguments (``ns::f``)."""
        for macro in self.lx.macros.values():
            if not macro.params:
                continue
            params = set(macro.params)
            body = macro.body
            for k, b in enumerate(body):
                if b.kind == "id" and b.text in params and (
                        (k + 1 < len(body) and body[k + 1].text == "::")
                        or (k > 0 and body[k - 1].text == "::")):
                    self.add("dynamic_code", b.line, f"macro `{macro.name}` builds a qualified name from its "
                                                     "arguments, which hides what it calls; write names out")
                    break


def scan_cpp(sources: list[CppSource], ops: TaskOps, backend: str, report: Report) -> None:
    """Scan every C/C++/CUDA source of a solution together (joins may be in another file)."""
    lexed = [lex(src.text) for src in sources]
    facts = _collect_facts(lexed)
    for src, lx in zip(sources, lexed):
        _FileScan(src, lx, facts, ops, backend, report).run()
