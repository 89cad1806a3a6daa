"""The record of what a built extension links to: which imports lead to compute nobody records.

Classification is checked on mangled names as the linker writes them; the reading of a real
shared object's imports on objects compiled here with the system's C++ compiler.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.judge.linked_symbols import imported_symbols, linked_violations, nested_name, refusal, why_refused


@pytest.mark.parametrize("symbol, refused", [
    ("_ZN2at3cpu2mmERKNS_6TensorES3_", True),                                   # at::cpu::mm
    ("_ZN2at3cpu6mm_outERNS_6TensorERKS1_S4_", True),                           # at::cpu::mm_out
    ("_ZN2at4cuda3addERKNS_6TensorES3_RKN3c106ScalarE", True),                  # at::cuda::add
    ("_ZN2at25compositeexplicitautograd3addERKNS_6TensorES3_RKN3c106ScalarE", True),
    ("_ZN2at6native8add_stubE", True),                                          # a DispatchStub
    ("_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_", True),
    ("_ZNK3c1010Dispatcher10findSchemaERKNS_12OperatorNameE", True),
    ("dlsym", True), ("dl_iterate_phdr", True), ("fopen", True), ("mprotect", True), ("syscall", True),
    ("cblas_sgemm", True), ("sgemm_", True),
    ("_ZNSt14basic_ifstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode", True),
    # What honest extensions import: the dispatcher's entry (recorded at run time), helpers,
    # allocation, metadata, the C and C++ runtimes, OpenMP, CUDA's runtime and allowed libraries.
    ("_ZN2at4_ops4relu4callERKNS_6TensorE", False),
    ("_ZN2at4_ops10empty_like4callERKNS_6TensorESt8optionalIN3c1010ScalarTypeEE", False),
    ("_ZNK2at10TensorBase8data_ptrIfEEPT_v", False),
    ("_ZN2at3cpu14L1d_cache_sizeEv", False),
    ("_ZN3c104cuda20getCurrentCUDAStreamEa", False),
    ("_ZN3c106detail14torchCheckFailEPKcS2_jRKSs", False),
    ("memcpy", False), ("GOMP_parallel", False), ("expf", False), ("cudaLaunchKernel", False),
    ("cublasSgemm_v2", False), ("cudnnConvolutionForward", False), ("PyObject_GetAttrString", False),
])
def test_imports_are_told_apart(symbol, refused):
    assert (why_refused(symbol) is not None) == refused, (symbol, why_refused(symbol))


def test_nested_names_read_from_the_mangling():
    assert nested_name("_ZN2at3cpu2mmERKNS_6TensorES3_") == ("at", "cpu", "mm")
    assert nested_name("_ZNK2at10TensorBase8data_ptrIfEEPT_v") == ("at", "TensorBase", "data_ptr")
    assert nested_name("memcpy") == ()


def _shared_object(tmp_path: Path, name: str, source: str) -> Path:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", str(src), "-o", str(out)], check=True, capture_output=True)
    return out


def test_a_module_that_looks_code_up_at_run_time_is_refused(tmp_path):
    looks_up = _shared_object(tmp_path, "looks_up", """
        #include <dlfcn.h>
        extern "C" void* find(const char* name) { return dlsym(RTLD_DEFAULT, name); }
    """)
    assert "dlsym" in imported_symbols(looks_up)
    found = linked_violations(looks_up)
    assert [v.rule for v in found] == ["linked_symbols"]
    assert "`dlsym`" in found[0].message and "looks up code at run time" in found[0].message
    status, error, violations = refusal(looks_up, "cpu")
    assert status == "forbidden" and violations == found and "dlsym" in error


def test_a_module_that_only_computes_is_not(tmp_path):
    computes = _shared_object(tmp_path, "computes", """
        #include <cmath>
        #include <cstring>
        extern "C" void kernel(float* y, const float* x, int n) {
            std::memcpy(y, x, n * sizeof(float));
            for (int i = 0; i < n; ++i) y[i] = std::exp(y[i]);
        }
    """)
    assert linked_violations(computes) == []
    assert refusal(computes, "cpu") is None


def test_an_unreadable_module_is_the_judges_failure_not_a_refusal(tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an ELF file")
    status, error, violations = refusal(junk, "cpu")
    assert status == "setup_error" and violations == [] and "could not read" in error


def test_cuda_modules_are_left_to_the_kernel_record(tmp_path):
    # CUDA's static runtime imports open/fopen64/syscall in every module; the kernel record sees
    # GPU work whatever road led to it.
    looks_up = _shared_object(tmp_path, "looks_up_cuda", """
        #include <dlfcn.h>
        extern "C" void* find(const char* name) { return dlsym(RTLD_DEFAULT, name); }
    """)
    assert refusal(looks_up, "cuda") is None
