"""The record of what a built extension links to: which imports lead to compute nobody records.

Classification is checked on mangled names as the linker writes them; the reading of a real
shared object's imports on objects compiled here with the system's C++ compiler.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.judge.linked_symbols import (imported_symbols, linked_violations, nested_name, record_own_imports,
                                            refusal, why_refused)


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


def test_only_the_imports_of_the_solutions_own_objects_count(tmp_path):
    """A toolchain that links parts of the C++ runtime into the module brings their imports
    (``open`` from std::random_device, ``syscall`` from a static's guard): the judge's record of
    what the solution's objects reference keeps those out, and keeps the solution's own in."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    sources = {
        "runtime_part": '#include <fcntl.h>\nextern "C" int runtime_opens(const char* p) { return open(p, O_RDONLY); }\n',
        "solution": 'extern "C" int runtime_opens(const char*);\nextern "C" int kernel(int x) { return x * 2; }\n',
        "solution_that_opens": '#include <fcntl.h>\nextern "C" int peek(const char* p) { return open(p, O_RDONLY); }\n',
    }
    objects = {}
    for name, text in sources.items():
        (tmp_path / f"{name}.cpp").write_text(text)
        objects[name] = tmp_path / f"{name}.o"
        subprocess.run([compiler, "-c", "-fPIC", str(tmp_path / f"{name}.cpp"), "-o", str(objects[name])], check=True)

    def link(names: list[str], own: list[str] | None) -> Path:
        directory = tmp_path / "-".join(names)
        directory.mkdir()
        module = directory / "cuda_extension.so"
        subprocess.run([compiler, "-shared", *(str(objects[n]) for n in names), "-o", str(module)], check=True)
        if own is not None:
            record_own_imports([objects[n] for n in own], directory)
        return module

    assert "open" in imported_symbols(link(["runtime_part", "solution"], own=["solution"]))
    assert refusal(tmp_path / "runtime_part-solution" / "cuda_extension.so", "cpu") is None
    status, _error, violations = refusal(link(["runtime_part", "solution_that_opens"], own=["solution_that_opens"]),
                                         "cpu")
    assert status == "forbidden" and "`open`" in violations[0].message
    # No record (a module built with link flags of the solution's own): every import counts.
    assert refusal(link(["solution", "runtime_part"], own=None), "cpu")[0] == "forbidden"
