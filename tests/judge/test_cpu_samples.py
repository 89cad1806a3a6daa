"""The judge's CPU sample record of a candidate's process (judge/cpu_samples.py): the kernel samples
another process's threads into rings only the judge maps, and each sample lands in the file mapped
at its address."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.judge import cpu_samples
from cuda_agent.judge.cpu_samples import PERIOD_NS, ProcessSampler, SampleCount, is_other_library, now_ns
from cuda_agent.judge.evidence import LIBRARY_SHARE, MIN_LIBRARY_SAMPLES, assess_cpu_samples

WHY = cpu_samples.unavailable()
needs_sampling = pytest.mark.skipif(WHY is not None, reason=f"this host refuses sampling: {WHY}")

# A process that, on each line it reads, works for the CPU time asked in the way asked, then
# answers. (CPU time, not wall time: on a loaded machine the two part.)
CHILD = textwrap.dedent("""
    import sys, threading, time
    import numpy as np
    import torch
    torch.set_num_threads(1)
    x = np.random.rand(1 << 20).astype(np.float32)
    a, b, c = (torch.rand(512, 512) for _ in range(3))
    def jit(code=bytes.fromhex("b980969800" "ffc9" "75fc" "c3")):
        import ctypes, mmap
        global _jit
        if "_jit" not in globals():
            page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            page.write(code)
            _jit = (page, ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page))))
        _jit[1]()
    def work(kind, seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            if kind == "numpy":
                np.sqrt(np.maximum(x * 2.0 + 1.0, 0.0))
            elif kind == "aten":  # ATen's compute kernels, as any road to them would run them
                torch.mm(a, b, out=c)
                torch.add(a, b, out=c)
            elif kind == "jit":  # machine code in memory no file backs (x86-64: count ecx down, return)
                jit()
            elif kind == "copies":  # what a solution may dispatch: copies, fills, allocation
                c.copy_(a)
                a.t().contiguous()
                c.fill_(1.0)
                torch.empty_like(a).zero_()
            else:
                sum(i * i for i in range(2000))
    print("ready", flush=True)
    for line in sys.stdin:
        kind, seconds = line.split()
        if kind == "load":  # map a library (here ``seconds`` is its path) and say where its code is
            import ctypes
            print(ctypes.cast(ctypes.CDLL(seconds).cos, ctypes.c_void_p).value, flush=True)
        elif kind == "thread":  # the work in a thread started for it
            t = threading.Thread(target=work, args=("numpy", float(seconds))); t.start(); t.join()
        else:
            work(kind, float(seconds))
        print("done", flush=True)
""")


@pytest.fixture
def child():
    # One thread for NumPy's BLAS: its pool's threads would otherwise spin in it after the numpy
    # work, which the record rightly sees as that library's.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def _call(proc: subprocess.Popen, sampler: ProcessSampler, kind: str, seconds: float, watched: bool = True,
          on: bool = True) -> None:
    """One call of the child's, with the record on (``on``) and its window marked (``watched``)."""
    if on:
        sampler.enable()
    start = now_ns()
    proc.stdin.write(f"{kind} {seconds}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"
    if on:
        sampler.disable()
    if watched:
        sampler.watch(start, now_ns())
    sampler.read()


@needs_sampling
def test_numpy_work_in_a_window_is_counted_as_another_librarys(child):
    sampler = ProcessSampler(child.pid)
    try:
        for _ in range(3):
            _call(child, sampler, "numpy", 0.1)
        count = sampler.count
    finally:
        sampler.close()
    assert count.samples >= MIN_LIBRARY_SAMPLES, count.to_dict()
    assert count.library_share > 0.5, count.to_dict()
    assert any("numpy" in f for f in count.files)  # NumPy's own library (or the BLAS it bundles)
    assert assess_cpu_samples(count, "model_new.py")[0].rule == "library_compute"


@needs_sampling
def test_pure_python_work_is_not_and_samples_outside_windows_are_set_apart(child):
    sampler = ProcessSampler(child.pid)
    try:
        _call(child, sampler, "python", 0.2)
        _call(child, sampler, "numpy", 0.2, watched=False)  # e.g. a prepare step: not a timed call
        count = sampler.count
    finally:
        sampler.close()
    assert count.samples >= MIN_LIBRARY_SAMPLES, count.to_dict()
    assert count.library_share < LIBRARY_SHARE, count.to_dict()
    assert count.outside >= MIN_LIBRARY_SAMPLES  # the unwatched numpy work, seen and set apart
    assert assess_cpu_samples(count, "model_new.py") == []


@needs_sampling
def test_nothing_is_sampled_while_the_record_is_off(child):
    sampler = ProcessSampler(child.pid)
    try:
        _call(child, sampler, "numpy", 0.2, on=False)
        assert sampler.count.samples == sampler.count.outside == 0
        _call(child, sampler, "numpy", 0.05)
        assert sampler.count.samples > 0
    finally:
        sampler.close()


@needs_sampling
def test_a_thread_started_inside_a_sampled_call_is_sampled_in_it(child):
    sampler = ProcessSampler(child.pid)
    try:
        _call(child, sampler, "thread", 0.2)  # all its work in a thread started inside the call
        count = sampler.count
    finally:
        sampler.close()
    # the thread inherited the events: its 0.2 s of NumPy is in this call's samples
    assert count.cpu_ms >= 150 and count.coverage > 0.5, count.to_dict()
    assert count.library_share > 0.5, count.to_dict()
    assert assess_cpu_samples(count, "model_new.py")[0].rule == "library_compute"


@needs_sampling
def test_a_library_mapped_while_the_record_is_off_is_known_at_the_next_sampled_call(child, tmp_path):
    import ctypes.util

    libm = ctypes.util.find_library("m")
    found = [p for p in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                         "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu") if libm and os.path.exists(f"{p}/{libm}")]
    if not found:
        pytest.skip("no libm file to copy")
    copy = tmp_path / "fast.so"  # a library under another name, where the candidate may write
    copy.write_bytes(Path(found[0], libm).read_bytes())
    sampler = ProcessSampler(child.pid)
    try:
        child.stdin.write(f"load {copy}\n")  # the record is off: no mmap record of it
        child.stdin.flush()
        address = int(child.stdout.readline())
        assert child.stdout.readline().strip() == "done"
        sampler.enable()
        sampler.disable()
        path = sampler._mapping_at(address).path
    finally:
        sampler.close()
    assert path is not None and os.path.samefile(path, copy)
    assert sampler.is_library(path)


@needs_sampling
def test_threads_started_while_the_record_is_off_are_sampled_once_it_is_on(child):
    sampler = ProcessSampler(child.pid)
    try:
        threads_before = set(sampler.threads)
        # A thread started and ended with the record off, then one started inside a call: neither
        # gets a ring of its own (they inherit), and nothing is sampled twice.
        _call(child, sampler, "thread", 0.02, on=False, watched=False)
        _call(child, sampler, "thread", 0.1)
        assert set(sampler.threads) == threads_before
        count = sampler.count
    finally:
        sampler.close()
    assert count.outside == 0 and count.coverage < 1.3, count.to_dict()


def test_which_files_count_as_another_library(tmp_path):
    site = tmp_path / "python" / "lib" / "site-packages"
    own = (str(site / "torch") + os.sep, str(tmp_path / "run" / "extension") + os.sep)
    roots = (str(tmp_path / "python") + os.sep, "/usr/lib/")

    def is_library(path: str) -> bool:
        return is_other_library(path, own, roots)

    assert is_library(str(site / "numpy" / "_core" / "_multiarray_umath.so"))
    assert is_library(str(site / "numpy.libs" / "libscipy_openblas64_-ff651d7f.so"))
    assert is_library(str(site / "scipy" / "linalg" / "_fblas.so"))
    assert is_library("/usr/lib/x86_64-linux-gnu/libopenblas.so.0")  # a BLAS wherever it lives
    # A library copied under another name to where the candidate may write, and loaded from there.
    assert is_library(str(tmp_path / "run" / "candidate-home" / "fast.so"))
    assert not is_library(str(site / "torch" / "lib" / "libtorch_cpu.so"))  # the link record's
    assert not is_library(str(tmp_path / "run" / "extension" / "cuda_extension.so"))  # the judge's build
    assert not is_library("/usr/lib/x86_64-linux-gnu/libc.so.6")
    assert not is_library(str(tmp_path / "python" / "lib" / "python3.11" / "lib-dynload" / "_ctypes.so"))


def test_the_verdict_needs_enough_samples_and_more_than_the_share():
    few = SampleCount(samples=MIN_LIBRARY_SAMPLES - 1, library=MIN_LIBRARY_SAMPLES - 1)
    assert assess_cpu_samples(few, "model_new.py") == []  # too short a record to decide
    under = SampleCount(samples=100, library=int(100 * LIBRARY_SHARE))
    assert assess_cpu_samples(under, "model_new.py") == []
    over = SampleCount(samples=100, library=int(100 * LIBRARY_SHARE) + 1, files={"/x/numpy/_core/m.so": 26})
    (violation,) = assess_cpu_samples(over, "model_new.py")
    assert violation.rule == "library_compute" and "m.so" in violation.message
    assert over.to_dict()["period_us"] == PERIOD_NS / 1e3


def test_a_process_the_judge_may_not_sample_is_refused_with_the_reason():
    with pytest.raises(cpu_samples.SamplesUnavailable, match="gone"):
        ProcessSampler(2 ** 22 + 12345)  # no such process


def test_the_cpus_a_process_may_run_on_are_its_cpusets_not_its_affinity():
    from cuda_agent.device import cpu_list

    assert cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    cpus = cpu_samples.process_cpus(os.getpid())
    # Every CPU it runs on now, and any it could move to by setting its own affinity.
    assert set(os.sched_getaffinity(0)) <= set(cpus)
    with pytest.raises(cpu_samples.SamplesUnavailable, match="gone"):
        cpu_samples.process_cpus(2 ** 22 + 12345)


@needs_sampling
def test_atens_compute_kernels_are_counted_and_the_copies_a_solution_may_dispatch_are_not(child):
    sampler = ProcessSampler(child.pid)
    try:
        _call(child, sampler, "copies", 0.2)
        copies = sampler.count
        copies_seen = (copies.samples, copies.aten)
        _call(child, sampler, "aten", 0.2)
        both = sampler.count
    finally:
        sampler.close()
    # (the OpenMP runtime torch bundles is stripped: its few samples, if any, are left unplaced)
    assert copies.unresolved <= 0.05 * copies_seen[0], copies.to_dict()
    assert copies_seen[0] >= MIN_LIBRARY_SAMPLES and copies_seen[1] <= 0.05 * copies_seen[0], copies.to_dict()
    aten = both.aten - copies_seen[1]
    assert aten > 0.5 * (both.samples - copies_seen[0]), both.to_dict()
    assert {"mm", "add_kernel"} & set(both.kernels) or any(k.startswith("mkl_") for k in both.kernels), both.kernels
    (violation,) = assess_cpu_samples(both, "model_new.py")
    assert violation.rule == "library_compute" and "ATen's" in violation.message


def test_which_of_torchs_functions_are_atens_compute():
    from cuda_agent.judge.aten_kernels import kernel_of

    compute = {
        "at::native::AVX2::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)": "add_kernel",
        # a loop is the kernel named in its template arguments
        "void at::native::AVX2::VectorizedLoop2d<at::native::AVX2::(anonymous namespace)::mul_kernel("
        "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float, float)#1}>::operator()("
        "char**, long const*, long, long)": "mul_kernel",
        "at::native::cpublas::gemm(at::native::TransposeType, at::native::TransposeType, long, long, long, "
        "float, float const*, long, float const*, long, float, float*, long)": "cpublas",
        "mkl_blas_avx2_sgemm_kernel_0": "mkl_blas_avx2_sgemm_kernel_0",
        "Sleef_expf8_u10avx2": "Sleef_expf8_u10avx2",
        "dnnl::impl::cpu::x64::jit_avx2_conv_fwd_kernel_f32::execute(void*)": "dnnl::impl::cpu::x64::jit_avx2_conv_fwd_kernel_f32::execute",
    }
    for name, kernel in compute.items():
        assert kernel_of(name) == kernel, name
    plumbing = [
        "at::native::AVX2::copy_kernel(at::TensorIterator&, bool)::{lambda()#1}::operator()() const",
        "void at::native::AVX2::cpu_kernel_vec<at::native::AVX2::direct_copy_kernel(at::TensorIteratorBase&)"
        "::{lambda()#3}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, int, long)",
        "at::native::AVX2::fill_kernel(at::TensorIterator&, c10::Scalar const&)",
        "at::native::empty_cpu(c10::ArrayRef<long>, std::optional<c10::ScalarType>)",
        "at::native::contiguous(at::Tensor const&, c10::MemoryFormat)",
        "at::native::_local_scalar_dense_cpu(at::Tensor const&)",
        "c10::Dispatcher::callBoxed(c10::OperatorHandle const&, std::vector<c10::IValue>*) const",
        "at::TensorIteratorBase::serial_for_each(c10::function_ref<void (char**, long const*, long, long)>, "
        "at::Range) const",
        "torch::autograd::THPVariable_contiguous(_object*, _object*, _object*)",
    ]
    for name in plumbing:
        assert kernel_of(name) is None, name


@needs_sampling
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the machine code is x86-64's")
def test_code_no_file_backs_is_counted(child):
    sampler = ProcessSampler(child.pid)
    try:
        _call(child, sampler, "jit", 0.1)  # its page is mapped inside the call: a mmap record names it
        _call(child, sampler, "jit", 0.1)  # and now read from the process's maps as the call begins
        count = sampler.count
    finally:
        sampler.close()
    assert count.unbacked > 0.8 * count.samples, count.to_dict()
    (violation,) = assess_cpu_samples(count, "model_new.py")
    assert "code no file backs" in violation.message
