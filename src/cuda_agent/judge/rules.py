"""The judge's rules: every violation it can report, by name, with what the rule forbids.

Static rules come from scanning the candidate's sources before anything is built; runtime rules
from evidence gathered inside the candidate's process while it runs. A violation of either kind
ends the run with status ``forbidden`` (timing rules: ``runtime_error``). Static scans and
in-process records are tripwires: the process boundary, fresh secret inputs and the judge's own
clock are what actually hold; the tripwires name what a solution tried, so a policy learns why.
"""

from __future__ import annotations

STATIC_RULES: dict[str, str] = {
    "torch_compute": "PyTorch computes something: in model_new.py outside __init__ (torch.* or "
                     "F.* compute functions, compute tensor methods, `@`, calling nn modules, "
                     "torch.compile/jit), or through torch::/at:: or tensor methods in C++; only "
                     "allocation, views, dtype/device copies and tensor metadata are allowed",
    "reference_access": "the solution imports, subclasses, aliases or calls the reference Model, "
                        "or imports the judge",
    "exception_fallback": "try/except, contextlib.suppress, a swallowing __exit__, signal handlers, "
                          "or a C++ catch/setjmp that can fall back to another path",
    "concurrency": "threads, processes, async code, extra CUDA streams or graphs, or a changed "
                   "thread count, started or set by the candidate",
    "unjoined_stream": "a CUDA stream, host callback or thread that the sources never synchronise "
                       "or join",
    "introspection": "reaching into interpreter, judge or PyTorch internals (frames, gc, "
                     "sys.modules, inspect, builtins, code objects, torch._*, tensor subclasses, "
                     "__torch_function__/__torch_dispatch__, the CPython C API)",
    "monkeypatch": "replacing or deleting attributes of torch, the standard library or the harness, "
                   "or registering PyTorch operators",
    "dynamic_code": "exec/eval/compile/__import__/importlib, names assembled at runtime, "
                    "serialized code, runtime compilation (NVRTC, module loading), C preprocessor "
                    "token pasting, or sources the checks cannot read",
    "native_access": "ctypes, cffi, mmap, dlopen/dlsym, /proc, system calls or other ways to call "
                     "or patch native code directly",
    "numerics_flags": "changing global numerics or random state (TF32, matmul precision, cuDNN "
                      "benchmark or determinism, autocast, default dtype or device, flush-to-zero, "
                      "random seeds)",
    "io_access": "file, network, environment, command-line or process access",
    "library_use": "a library beyond what the SKILL allows (cuBLAS only through its GEMM API and "
                   "only when the task multiplies matrices or convolves, cuDNN only through its "
                   "convolution API and only when the task convolves; no Thrust/CUB device "
                   "algorithms, CUTLASS, cuFFT, cuRAND, Triton or the like); in Python, any module "
                   "beyond torch, the solution's extension and the standard library's pure helpers "
                   "(NumPy, SciPy, ...), and handing tensor data to Python or NumPy (.numpy(), "
                   ".tolist())",
}

RUNTIME_RULES: dict[str, str] = {
    "dispatched_compute": "an ATen compute op was dispatched during forward (from Python or C++)",
    "unattributed_kernels": "most GPU time during forward went to kernels that are neither the "
                            "solution's own nor an allowed library's",
    "own_kernels_idle": "the solution defines kernels but none of them ran during forward",
    "thread_left_running": "forward returned while a thread it started was still running",
    "flags_changed": "global torch numerics settings differ after the candidate ran",
    "records_disabled": "the judge's op counter was removed or switched off in the candidate's process",
    "process_left_running": "a process the candidate started (forked, detached or not) was still "
                            "running when its calls had returned",
    # Read by the judge from the extension it built, before any of it runs.
    "linked_symbols": "the built extension imports a way to compute that the op records cannot see: "
                      "ATen's kernels below the dispatcher (at::cpu::, at::native::, redispatch, the "
                      "dispatcher's tables), a host BLAS, or the means to find such code at run time "
                      "(dlsym, opening files, mapping memory, raw system calls)",
    # Sampled by the kernel for the judge, outside the candidate's reach (cpu_samples).
    "library_compute": "the sampled calls' CPU time went to another library's code (NumPy, SciPy, a BLAS, "
                       "any package's native code but torch's and the solution's own)",
}

TIMING_RULES: dict[str, str] = {
    "timing_integrity": "the judge's own clock disagrees with the candidate's timing",
    "impossible_time": "faster than the device can move the task's output or do its arithmetic",
}

RULES: dict[str, str] = {**STATIC_RULES, **RUNTIME_RULES, **TIMING_RULES}


def describe(rule: str) -> str:
    return RULES[rule]
