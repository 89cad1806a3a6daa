"""Solutions: the candidate's own files, and nothing else.

Two layouts:

* ``workspace`` (CUDA Agent's): ``model_new.py`` defining ``ModelNew`` and importing the compiled
  extension as ``import cuda_extension``; kernels under ``kernels/`` (``NAME.cu`` on the cuda
  backend, ``NAME.cpp`` on the cpu backend) and ``NAME_binding.cpp`` files that register their
  functions with ``REGISTER_BINDING`` from the judge's ``binding_registry.h``.
* ``single_file`` (KernelBench's): one ``model_new.py`` that builds its own extension with
  ``torch.utils.cpp_extension.load_inline``.

Only ``model_new.py`` and source files under ``kernels/`` are taken from a workspace; everything
else there (binding.cpp, the registry header, model.py, build products) is ignored, because the
judge supplies its own infrastructure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from . import pysource
from .errors import SolutionFormatError
from .task import Task

Layout = Literal["workspace", "single_file"]

MODEL_FILE = "model_new.py"
KERNEL_DIR = "kernels"
BINDING_SUFFIX = "_binding.cpp"
CXX_SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")
CUDA_SOURCE_SUFFIXES = (".cu",)
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
KERNEL_SUFFIXES = CXX_SOURCE_SUFFIXES + CUDA_SOURCE_SUFFIXES + HEADER_SUFFIXES
EXTENSION_MODULE = "cuda_extension"

MAX_FILES = 64
MAX_FILE_BYTES = 512 * 1024


@dataclass(frozen=True)
class Solution:
    """The candidate files, as relative POSIX paths mapped to their text."""

    files: dict[str, str]
    layout: Layout
    origin: str
    ignored: tuple[str, ...] = field(default=(), compare=False)

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(self.layout.encode())
        for path in sorted(self.files):
            digest.update(b"\0" + path.encode() + b"\0" + self.files[path].encode())
        return digest.hexdigest()

    @property
    def model_source(self) -> str:
        return self.files[MODEL_FILE]

    def kernel_files(self, suffixes: tuple[str, ...]) -> list[str]:
        return sorted(p for p in self.files if p.startswith(KERNEL_DIR + "/") and p.endswith(suffixes))

    def binding_files(self) -> list[str]:
        return [p for p in self.kernel_files(CXX_SOURCE_SUFFIXES) if p.endswith(BINDING_SUFFIX)]

    def write_to(self, directory: Path) -> None:
        """Materialise the candidate files under ``directory``."""
        for rel, text in self.files.items():
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)


def _read_text(path: Path, rel: str) -> str:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SolutionFormatError(
            f"{rel} is {size} bytes; solution files are limited to {MAX_FILE_BYTES} bytes each"
        )
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise SolutionFormatError(f"{rel} is not UTF-8 text") from None


def _collect_kernels(root: Path) -> tuple[dict[str, str], list[str]]:
    files: dict[str, str] = {}
    skipped: list[str] = []
    kernel_dir = root / KERNEL_DIR
    if not kernel_dir.is_dir():
        return files, skipped
    for path in sorted(kernel_dir.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = PurePosixPath(path.relative_to(root)).as_posix()
        if path.suffix not in KERNEL_SUFFIXES:
            skipped.append(rel)
            continue
        files[rel] = _read_text(path, rel)
    return files, skipped


def load_solution(path: str | Path) -> Solution:
    """Load a workspace directory, or a single KernelBench-style ``model_new.py``."""
    path = Path(path)
    if not path.exists():
        raise SolutionFormatError(f"solution path {path} does not exist")
    if path.is_file():
        if path.suffix != ".py":
            raise SolutionFormatError(
                f"solution {path} is neither a workspace directory nor a .py file"
            )
        source = _read_text(path, path.name)
        solution = Solution({MODEL_FILE: source}, "single_file", str(path))
        try:
            imports = _imports(solution)
        except SyntaxError:
            return solution  # validate_solution reports it, with the file and line
        if EXTENSION_MODULE in imports:
            raise SolutionFormatError(
                f"{path} imports {EXTENSION_MODULE}, which is built from a workspace's kernels/; "
                f"pass the workspace directory ({path.parent}) instead of the file"
            )
        return solution

    model = path / MODEL_FILE
    if not model.is_file():
        raise SolutionFormatError(f"solution directory {path} has no {MODEL_FILE}")
    files = {MODEL_FILE: _read_text(model, MODEL_FILE)}
    kernels, skipped = _collect_kernels(path)
    files.update(kernels)
    if len(files) > MAX_FILES:
        raise SolutionFormatError(f"solution {path} has {len(files)} files; the limit is {MAX_FILES}")
    ignored = sorted(
        {p.name for p in path.iterdir() if p.name not in (MODEL_FILE, KERNEL_DIR)} | set(skipped)
    )
    layout: Layout = "workspace" if kernels else "single_file"
    return Solution(files, layout, str(path), tuple(ignored))


def _model_path(solution: Solution) -> str:
    """Where model_new.py is, for messages: the file itself, or inside the directory."""
    return solution.origin if solution.origin.endswith(".py") else f"{solution.origin}/{MODEL_FILE}"


def _imports(solution: Solution) -> set[str]:
    tree = pysource.parse(solution.model_source, _model_path(solution))
    return {name.split(".")[0] for name in pysource.imported_modules(tree)}


def validate_solution(solution: Solution, task: Task, backend: str) -> None:
    """Raise SolutionFormatError naming the file and what is wrong."""
    where = _model_path(solution)
    try:
        tree = pysource.parse(solution.model_source, where)
    except SyntaxError as exc:
        raise SolutionFormatError(f"solution {exc}") from None
    cls = pysource.top_level_class(tree, "ModelNew")
    if cls is None:
        raise SolutionFormatError(f"{where} defines no `class ModelNew` at module level")

    expected = task.init_signature()
    actual = pysource.init_signature(cls)
    expected_names = expected.names if expected else ()
    actual_names = actual.names if actual else ()
    if expected_names != actual_names and not (actual and (actual.has_varargs or actual.has_varkw)):
        raise SolutionFormatError(
            f"{where}: ModelNew's constructor signature differs from Model's: "
            f"Model has {expected.describe() if expected else '__init__()'}, ModelNew has "
            f"{actual.describe() if actual else '__init__()'}. ModelNew must take the same "
            "arguments and create the same parameters, so the reference weights load into it."
        )

    imports = {name.split(".")[0] for name in pysource.imported_modules(tree)}
    if solution.layout == "workspace":
        if EXTENSION_MODULE not in imports:
            raise SolutionFormatError(
                f"{where} does not `import {EXTENSION_MODULE}`; in the workspace layout ModelNew "
                f"calls the kernels built from kernels/ through that module"
            )
        cuda_sources = solution.kernel_files(CUDA_SOURCE_SUFFIXES)
        if backend == "cpu" and cuda_sources:
            raise SolutionFormatError(
                f"{solution.origin} has CUDA sources ({', '.join(cuda_sources)}) but the cpu backend "
                "builds C++ kernels: write them as kernels/NAME.cpp, or judge with --device cuda"
            )
        if not solution.binding_files():
            raise SolutionFormatError(
                f"{solution.origin}/kernels has no NAME{BINDING_SUFFIX}: each kernel needs a binding "
                'file that includes "../binding_registry.h" and calls REGISTER_BINDING'
            )
    elif EXTENSION_MODULE in imports:
        raise SolutionFormatError(
            f"{where} imports {EXTENSION_MODULE} but {solution.origin} has no kernel sources under "
            f"{KERNEL_DIR}/: write each kernel with a NAME{BINDING_SUFFIX} that includes "
            '"../binding_registry.h" and calls REGISTER_BINDING'
        )
