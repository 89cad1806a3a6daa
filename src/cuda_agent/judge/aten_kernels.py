"""Which of torch's machine code is ATen's compute, read by the judge from torch's own files.

The CPU samples (``cpu_samples``) place each sample in the file mapped at its address. Torch's
libraries hold both what an honest call runs there (the Python binding, the dispatcher,
allocation, and the copy and fill kernels of the ops a solution may dispatch) and ATen's compute
kernels with the BLAS, oneDNN and SLEEF code linked into them, which C++ can reach below the
dispatcher by roads neither the op counter (inside the candidate's process) nor the link record
sees: a symbol table walked in memory from an imported function's address, say. So the judge
places a sample that lands in torch's code in the function that holds it, from the library's own
ELF symbol table (torch's wheels ship it), names the function (``c++filt``, from the binutils
that link every build), and counts it as compute where the function is an ATen kernel or a
library's other than one that the ops a solution may dispatch run (``evidence.ALLOWED_OPS``).

Everything here is read from files in torch's installation, which the candidate cannot write, in
the judge's own process.
"""

from __future__ import annotations

import bisect
import functools
import mmap
import os
import re
import shutil
import struct
import subprocess
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from .evidence import ALLOWED_OPS

_PT_LOAD, _SHT_SYMTAB = 1, 2
_STT_FUNC, _STT_GNU_IFUNC = 2, 10

# ATen's per-CPU namespaces (one copy of each vectorised kernel per instruction set) and
# anonymous namespaces, between ``at::native::`` and a kernel's own name.
_NATIVE_NAME = re.compile(r"at::native::(?:(?:DEFAULT|AVX2|AVX512\w*|CPU_CAPABILITY|SVE\w*|NEON|VSX|ZVECTOR"
                          r"|\(anonymous namespace\))::)*([A-Za-z_]\w*)")
# Libraries linked into torch that compute: MKL, oneDNN, SLEEF, FBGEMM, XNNPACK, QNNPACK, KleidiAI,
# and a BLAS (OpenBLAS's kernels, or the reference names).
_LIBRARY_CODE = re.compile(r"^(mkl_|dnnl|Sleef|sleef|fbgemm|xnn_|pytorch_qnnp|qnnp|kai_|cblas_|openblas|"
                           r"[sdcz](gemm|gemv|syrk|trsm|axpy|dot|scal|copy)|gemm_|libxsmm|mkldnn)")
# Names in at::native that every kernel's loop runs through: they compute nothing of their own,
# and the kernel a loop runs is named in its template arguments.
_LOOP_NAMES = frozenset("""
    cpu_kernel cpu_kernel_vec cpu_serial_kernel cpu_serial_kernel_vec VectorizedLoop2d vectorized_loop
    basic_loop unroll_contiguous_scalar dereference dereference_vec execute_op is_contiguous_scalar
    DispatchStub DispatchStubImpl detail
""".split())
# The implementations of the ops a solution may dispatch (allocation, views, metadata, copies)
# whose names are not the op's own.
_ALLOWED_IMPLEMENTATIONS = frozenset("""
    copy_kernel direct_copy_kernel reduced_float_copy_kernel copy_impl copy_same_type_transpose_
    copy_transpose_valid copy_requires_temporaries _copy_same_type_ copy_stub fill_kernel fill_stub
    fill_out fill_non_native_type fill_empty_deterministic_ empty_cpu empty_strided_cpu empty_generic
    empty_memory_format resize_impl_cpu_ resize_bytes_cpu maybe_resize_storage_cpu
    _local_scalar_dense_cpu arange_out arange_kernel arange_stub to_copy_out _to_copy_out zero_kernel
    view_impl alias_with_sizes_and_strides as_strided_tensorimpl setStrided clone_preserve_strides
    expand_inplace infer_size computeStride checkAsStridedArgs checkInBoundsForStorage
""".split())


@functools.lru_cache(maxsize=1)
def allowed_names() -> frozenset[str]:
    """at::native names of code the ops a solution may dispatch run: the ops' own names (and their
    ``_cpu``, ``_out`` and ``_symint`` variants), their kernels, and the loops every kernel uses."""
    ops = {op.split("::", 1)[1] for op in ALLOWED_OPS}
    variants = {f"{op}{suffix}" for op in ops for suffix in ("", "_cpu", "_out", "_symint", "_out_symint")}
    return frozenset(variants | _ALLOWED_IMPLEMENTATIONS | _LOOP_NAMES)


def kernel_of(name: str) -> str | None:
    """The compute a function of torch's is part of (``add_kernel``, ``mkl_blas_avx2_sgemm_...``),
    from its demangled name; None for code the ops a solution may dispatch run, and for the
    dispatcher, allocation, the binding and the rest of torch's plumbing."""
    if _LIBRARY_CODE.match(name):
        return re.split(r"[(<]", name.replace("(anonymous namespace)", "{anonymous}"), maxsplit=1)[0][:80]
    allowed = allowed_names()
    for found in _NATIVE_NAME.findall(name):
        if found not in allowed:
            return found
    return None


class SymbolsUnavailable(RuntimeError):
    """A library's functions could not be read (no symbol table, no ``c++filt``)."""


@dataclass
class _Segment:
    offset: int
    size: int
    vaddr: int


class LibraryFunctions:
    """The functions of one ELF library, by address: ``function_at(file_offset)`` finds the
    function whose code is at that offset of the file, ``name`` gives its mangled name."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as fh:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._read(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise SymbolsUnavailable(f"{os.path.basename(path)} is not an ELF library this judge can read: {exc}") \
                from None
        finally:
            data.close()

    def _read(self, data: mmap.mmap) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise SymbolsUnavailable(f"{os.path.basename(self.path)} is not a 64-bit little-endian ELF file")
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
        self.segments = []
        for i in range(phnum):
            kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if kind == _PT_LOAD:
                self.segments.append(_Segment(offset, filesz, vaddr))
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        # The full symbol table names every function, static ones too (ATen's kernels mostly are);
        # the dynamic one only those the library exports.
        table = next((s for s in sections if s[1] == _SHT_SYMTAB), None)
        if table is None:
            raise SymbolsUnavailable(f"{os.path.basename(self.path)} has no symbol table (stripped)")
        strtab = sections[table[6]]
        self._strtab_offset, self._strtab_size = strtab[4], strtab[5]
        entries = []
        for name, info, _other, _shndx, value, size in struct.iter_unpack("<IBBHQQ", data[table[4]:table[4] + table[5]]):
            if size and (info & 0xF) in (_STT_FUNC, _STT_GNU_IFUNC):
                entries.append((value, value + size, name))
        entries.sort()
        self._starts = array("Q", (e[0] for e in entries))
        self._ends = array("Q", (e[1] for e in entries))
        self._names = array("Q", (e[2] for e in entries))

    def vaddr(self, file_offset: int) -> int | None:
        for seg in self.segments:
            if seg.offset <= file_offset < seg.offset + seg.size:
                return file_offset - seg.offset + seg.vaddr
        return None

    def function_at(self, file_offset: int) -> int | None:
        """The function whose code is at this offset of the file (an index for ``name``), or None."""
        address = self.vaddr(file_offset)
        if address is None:
            return None
        i = bisect.bisect_right(self._starts, address) - 1
        # Several names may share code (aliases) or overlap: the nearest few that start below it.
        for j in range(i, max(i - 8, -1), -1):
            if address < self._ends[j]:
                return j
        return None

    def name(self, function: int) -> str:
        """The function's mangled name, read from the file's string table."""
        offset = self._names[function]
        with open(self.path, "rb") as fh:
            fh.seek(self._strtab_offset + offset)
            chunk = fh.read(min(65536, self._strtab_size - offset))
        return chunk.split(b"\0", 1)[0].decode(errors="replace")


@functools.lru_cache(maxsize=8)
def _functions(path: str, _size: int, _mtime_ns: int) -> LibraryFunctions:
    return LibraryFunctions(path)


def functions(path: str) -> LibraryFunctions:
    """The functions of the library at ``path``, read once per version of the file."""
    st = os.stat(path)
    return _functions(os.path.realpath(path), st.st_size, st.st_mtime_ns)


def demangle(names: list[str]) -> list[str]:
    """Itanium C++ names demangled by ``c++filt``, in order (plain C names as they are)."""
    if not names:
        return []
    tool = shutil.which("c++filt")
    if tool is None:
        raise SymbolsUnavailable("`c++filt` (GNU binutils, which links every build) is not on PATH; install binutils")
    done = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60)
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < len(names):
        raise SymbolsUnavailable(f"c++filt failed: {done.stderr.strip()[:200]}")
    return lines[:len(names)]


def kernels_at(hits: Iterable[tuple[str, int]]) -> tuple[dict[tuple[str, int], str | None], dict[str, str]]:
    """For samples in torch's libraries, each a (file, offset in it): the compute kernel each is
    in (``kernel_of``) or None, for the samples in files whose functions could be read; and for
    each file whose could not, why."""
    libraries: dict[str, LibraryFunctions] = {}
    unreadable: dict[str, str] = {}
    where: dict[tuple[str, int], tuple[str, int | None]] = {}
    for path, offset in hits:
        if path not in libraries and path not in unreadable:  # each file read (or stat'ed) once
            try:
                libraries[path] = functions(path)
            except (SymbolsUnavailable, OSError) as exc:
                unreadable[path] = str(exc)
        if path in libraries:
            where[(path, offset)] = (path, libraries[path].function_at(offset))
    mangled = {fn: libraries[fn[0]].name(fn[1]) for fn in set(where.values()) if fn[1] is not None}
    distinct = sorted(set(mangled.values()))
    readable = dict(zip(distinct, demangle(distinct)))
    return {key: (kernel_of(readable[mangled[fn]]) if fn in mangled else None) for key, fn in where.items()}, unreadable
