"""The compilers, paths and flags the judge builds extensions with.

The judge chooses every flag itself (candidates cannot pass their own). Flags mirror what
``torch.utils.cpp_extension`` uses for the installed torch, so that binding files see the same
headers and ABI as a regular torch extension, plus ``-O3`` and the device's own architecture.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from ..device import cpu_name
from ..errors import ToolchainError

EXTENSION_NAME = "cuda_extension"


def _run_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run `{' '.join(cmd)}`: {exc}") from None
    return (out.stdout + out.stderr).strip()


@functools.lru_cache(maxsize=None)
def find_cuda_home() -> Path | None:
    """CUDA_HOME, else torch's idea of it, else /usr/local/cuda, else the parent of nvcc."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    try:
        from torch.utils.cpp_extension import CUDA_HOME

        candidates.append(CUDA_HOME)
    except Exception:  # torch may be partially installed; the other candidates still apply
        pass
    candidates.append("/usr/local/cuda")
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for cand in candidates:
        if cand and (Path(cand) / "bin" / "nvcc").exists():
            return Path(cand)
    return None


def _nvidia_wheel_dirs(component: str) -> tuple[list[Path], list[Path]]:
    """Include and library dirs of an ``nvidia-<component>`` pip package, if installed."""
    includes, libs = [], []
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for root in (Path(site) / "nvidia" / component, Path(site) / "nvidia" / "cu13", Path(site) / "nvidia" / "cu12"):
            if (root / "include").is_dir():
                includes.append(root / "include")
            for lib in (root / "lib", root / "lib64"):
                if lib.is_dir():
                    libs.append(lib)
    return includes, libs


def _find_library(name: str, dirs: list[Path]) -> tuple[Path, str] | None:
    """The directory holding lib<name>.so and the -l argument that links it.

    Wheels often ship only the versioned file (libcublas.so.13); ``-l:FILE`` links that by name.
    """
    for d in dirs:
        if not d.is_dir():
            continue
        if (d / f"lib{name}.so").exists():
            return d, f"-l{name}"
        versioned = sorted(d.glob(f"lib{name}.so.*"), key=lambda p: len(p.name))
        if versioned:
            return d, f"-l:{versioned[0].name}"
    return None


def _torch_cxx_standard() -> str:
    """The C++ standard torch's own extension builder uses for this torch version."""
    import torch.utils.cpp_extension as cpp_ext

    source = Path(cpp_ext.__file__).read_text()
    return "c++20" if "-std=c++20" in source else "c++17"


@dataclass(frozen=True)
class Toolchain:
    """Everything needed to turn solution sources into a loadable ``cuda_extension`` module."""

    backend: str
    cxx: str
    nvcc: str | None
    kernel_cxx_flags: tuple[str, ...]   # plain C++ sources: cpu kernels, cuBLAS/cuDNN host code
    binding_flags: tuple[str, ...]      # *_binding.cpp and binding.cpp: torch and pybind headers
    nvcc_flags: tuple[str, ...]         # .cu sources: pure CUDA, no torch headers
    ldflags: tuple[str, ...]
    versions: tuple[str, ...] = field(default=())
    arch: str | None = None

    @property
    def identity(self) -> str:
        """Hash of everything that changes object code: compilers, torch, flags, machine."""
        digest = hashlib.sha256()
        for part in (self.backend, self.cxx, self.nvcc or "", *self.versions, *self.kernel_cxx_flags,
                     *self.binding_flags, *self.nvcc_flags, *self.ldflags, platform.machine()):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()[:24]


def cuda_arch_flag(capability: tuple[int, int]) -> str:
    major, minor = capability
    # sm_90a etc. need an explicit -gencode; plain sm_XY covers what a candidate can expect.
    return f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"


def detect_toolchain(backend: str, cuda_capability: tuple[int, int] | None = None,
                     fast_math: bool = False) -> Toolchain:
    """Find compilers and compute flags for ``backend`` ('cuda' or 'cpu')."""
    import torch
    import torch.utils.cpp_extension as cpp_ext

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise ToolchainError("no C++ compiler found: install g++ (or set CXX) to build candidates")
    if not shutil.which("ninja"):
        raise ToolchainError("ninja is not on PATH: `pip install ninja` (a dependency of cuda-agent)")

    std = _torch_cxx_standard()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    # Hidden visibility: a module exports only PyInit_cuda_extension, so symbols of two modules
    # loaded into one process never resolve to each other.
    common = ["-O3", "-fPIC", f"-std={std}", "-fvisibility=hidden", "-fvisibility-inlines-hidden"]
    python_include = sysconfig.get_paths()["include"]
    torch_includes = [f"-isystem{p}" for p in cpp_ext.include_paths()] + [f"-isystem{python_include}"]
    # Bindings are glue (argument checks, allocation, a launch), and most of their compile time is
    # optimising pybind11's and torch's templates: -O1 builds them in about two thirds of the time
    # of -O3. Their cost per call is host time, which the cuda backend's timing leaves out (the
    # device waits for the host's launch path); kernels keep -O3.
    binding = ["-O1", *common[1:]] + torch_includes + [
        f"-DTORCH_EXTENSION_NAME={EXTENSION_NAME}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        "-Wno-unused-variable",
    ]
    torch_lib = Path(cpp_ext.library_paths()[0])
    ldflags = ["-shared", f"-L{torch_lib}", "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    versions = [_run_version([cxx, "--version"]).splitlines()[0], torch.__version__]

    if backend == "cpu":
        # -fno-trapping-math: GCC will not turn a float comparison into a vector select while it
        # may trap, so a kernel with a clamp or a range check in its loop stayed scalar (9x slower
        # on the fused_elementwise example). It changes no value; no candidate can rely on traps.
        kernel = common + ["-fopenmp", "-march=native", "-fno-trapping-math"]
        return Toolchain("cpu", cxx, None, tuple(kernel), tuple(binding + ["-fopenmp"]), (),
                         tuple(ldflags + ["-fopenmp"]), tuple(versions + [cpu_name()]))

    cuda_home = find_cuda_home()
    if cuda_home is None:
        raise ToolchainError(
            "nvcc not found: the cuda backend compiles kernels/*.cu with nvcc. Install the CUDA "
            "toolkit and set CUDA_HOME, or judge CPU solutions with --device cpu"
        )
    if cuda_capability is None:
        raise ToolchainError("the cuda toolchain needs the device's compute capability")
    nvcc = str(cuda_home / "bin" / "nvcc")
    cuda_include = cuda_home / "include"
    lib_dirs = [cuda_home / "lib64", cuda_home / "targets" / f"{platform.machine()}-linux" / "lib"]
    cudnn_inc, cudnn_libs = _nvidia_wheel_dirs("cudnn")
    cublas_inc, cublas_libs = _nvidia_wheel_dirs("cublas")
    extra_includes = [f"-I{p}" for p in [cuda_include, *cublas_inc, *cudnn_inc]]
    arch = cuda_arch_flag(cuda_capability)

    nvcc_flags = ["-O3", f"-std={std}", arch, "-lineinfo", "--expt-relaxed-constexpr",
                  "-Xcompiler", "-fPIC,-fvisibility=hidden", *extra_includes[1:]]
    if fast_math:
        nvcc_flags.append("--use_fast_math")
    kernel = common + extra_includes
    binding = binding + ["-DCUDA_AGENT_WITH_CUDA"] + extra_includes
    ldflags += ["-lc10_cuda", "-ltorch_cuda"]
    # The allowed libraries (cuBLAS for GEMM, cuDNN for convolution) are linked when present.
    for name, dirs in (("cudart", lib_dirs), ("cublas", lib_dirs + cublas_libs),
                       ("cublasLt", lib_dirs + cublas_libs), ("cudnn", cudnn_libs)):
        found = _find_library(name, dirs)
        if found is not None:
            directory, link = found
            ldflags += [f"-L{directory}", f"-Wl,-rpath,{directory}", link]
        elif name == "cudart":
            raise ToolchainError(f"libcudart not found under {cuda_home}; check CUDA_HOME")
    versions.append(_run_version([nvcc, "--version"]).splitlines()[-1])
    return Toolchain("cuda", cxx, nvcc, tuple(kernel), tuple(binding), tuple(nvcc_flags),
                     tuple(ldflags), tuple(versions), arch)
