"""The judge's guards, one by one: runtime records and what they mean, the task audit, the
physical floor, input variation, and the sandbox's Landlock ruleset and privilege drop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.judge import evidence, recording
from cuda_agent.judge.audit import TaskAudit
from cuda_agent.judge.floor import Peaks, count_workload, floor_ms
from cuda_agent.judge.landlock import abi_version, build_ruleset
from cuda_agent.judge.static_checks import kernel_inventory
from cuda_agent.judge.sandbox import SandboxPolicy, make_preexec
from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.run_support import RunStopped
from cuda_agent.judge.run_verify import PROFILE_ATTEMPTS, RunVerification
from cuda_agent.judge.verdict import Verdict
from cuda_agent.judge.worker_main import perturb_parameters, transform_inputs
from cuda_agent.solution import Solution


def _solution(**files: str) -> Solution:
    return Solution(files={k.replace("__", "/"): v for k, v in files.items()}, layout="workspace", origin="test")


# -- ATen dispatch record -----------------------------------------------------------------------------
def test_record_ops_sees_compute_and_allocation():
    x = torch.randn(8, 8)
    _, ops = recording.record_ops(lambda: (torch.empty_like(x), x.view(64), torch.relu(x @ x)))
    assert {"aten::empty_like", "aten::view", "aten::mm", "aten::relu"} <= set(ops)
    assert evidence.forbidden_ops(ops) == ["aten::mm", "aten::relu"]


def test_allocation_views_and_copies_are_allowed():
    x = torch.randn(4, 6)

    def legal():
        out = torch.empty(4, 6)
        out.copy_(x.t().contiguous().view(6, 4).t())
        return out.reshape(24).unsqueeze(0).float().zero_()

    _, ops = recording.record_ops(legal)
    assert ops and evidence.assess_ops(ops, "model_new.py") == []


def test_dispatched_compute_names_the_ops():
    (violation,) = evidence.assess_ops({"aten::mm": 2, "aten::empty": 1}, "model_new.py")
    assert violation.rule == "dispatched_compute" and "aten::mm x2" in violation.message


# -- GPU kernel attribution -----------------------------------------------------------------------------
CUDA_SOURCE = """
template <int N> __global__ void __launch_bounds__(256) tiled_kernel(float* y) {}
__global__ void tail_kernel(const float* __restrict__ x) {}  // __global__ void not_a_kernel(
"""


def test_own_kernel_names_come_from_global_functions():
    solution = _solution(**{"kernels__k.cu": CUDA_SOURCE, "model_new.py": ""})
    inventory = kernel_inventory(solution)
    assert inventory.kernels == {"tiled_kernel", "tail_kernel"} and not inventory.calls_library


def test_kernels_are_attributed_to_the_solution_by_name():
    solution = _solution(**{"kernels__k.cu": CUDA_SOURCE})
    kernels = [{"name": "void tiled_kernel<4>(float*)", "device_ms": 1.0, "op": ""},
               {"name": "void at::native::vectorized_elementwise_kernel<4>(int)", "device_ms": 0.05,
                "op": "aten::copy_"}]
    assert evidence.assess_kernels(kernels, solution, "model_new.py") == []


def test_native_kernels_launched_directly_are_unattributed():
    solution = _solution(**{"kernels__k.cu": CUDA_SOURCE})
    kernels = [{"name": "void tiled_kernel<4>(float*)", "device_ms": 0.1, "op": ""},
               {"name": "void at::native::vectorized_elementwise_kernel<4>(int)", "device_ms": 0.9, "op": ""}]
    rules = [v.rule for v in evidence.assess_kernels(kernels, solution, "model_new.py")]
    assert rules == ["unattributed_kernels"]


def test_decoy_kernels_that_never_run_are_flagged():
    solution = _solution(**{"kernels__k.cu": CUDA_SOURCE, "kernels__gemm.cpp": "cublasSgemm(h);"})
    kernels = [{"name": "sm90_xmma_gemm_f32f32", "device_ms": 1.0, "op": ""}]
    rules = [v.rule for v in evidence.assess_kernels(kernels, solution, "model_new.py")]
    assert rules == ["own_kernels_idle"]  # the cuBLAS time itself is the library's


def test_library_kernels_count_only_for_a_solution_that_calls_the_library():
    kernels = [{"name": "void tiled_kernel<4>(float*)", "device_ms": 0.2, "op": ""},
               {"name": "sm90_xmma_gemm_f32f32", "device_ms": 0.8, "op": ""}]
    with_library = _solution(**{"kernels__k.cu": CUDA_SOURCE, "kernels__gemm.cpp": "cublasGemmEx(h);"})
    without = _solution(**{"kernels__k.cu": CUDA_SOURCE})
    assert evidence.assess_kernels(kernels, with_library, "m") == []
    assert [v.rule for v in evidence.assess_kernels(kernels, without, "m")] == ["unattributed_kernels"]


class _FailingProfiler:
    """Stands in for the kernel record's profiler: fails on entering, or when its events are read."""

    def __init__(self, when: str) -> None:
        self.when = when

    def __enter__(self):
        if self.when == "start":
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
        return self

    def __exit__(self, *exc):
        return False

    @property
    def function_events(self):
        raise RuntimeError("kineto: no trace")


@pytest.mark.parametrize("when", ["start", "events"])
def test_a_profiler_that_fails_gives_no_record_and_forward_runs_once(monkeypatch, when):
    monkeypatch.setattr(recording, "gpu_profiler", lambda: _FailingProfiler(when))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = []
    result, kernels = recording.record_kernels(lambda: calls.append(1) or "out")
    assert (result, kernels, calls) == ("out", None, [1])


def test_an_error_of_forward_under_the_profiler_is_raised_as_it_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def forward():
        raise ValueError("the candidate's bug")

    with pytest.raises(ValueError, match="the candidate's bug"):
        recording.record_kernels(forward)


def test_a_candidates_call_counts_its_threads_after_the_profilers_start(monkeypatch):
    # The worker's `run` itself waits: the start (two threads born 0.2 s in, as CUPTI's) falls
    # before the count, not inside forward, which would then seem to leave a thread running.
    from cuda_agent.judge.worker_main import Checks, Worker, vary_inputs

    def slow_start() -> None:
        time.sleep(0.2)
        for _ in range(2):
            threading.Thread(target=time.sleep, args=(2.0,), daemon=True).start()

    warmup = threading.Thread(target=slow_start, daemon=True)
    monkeypatch.setattr(recording, "_warmup", warmup)
    worker = Worker()
    worker.trusted, worker.flags_before = False, recording.numerics_flags()
    worker.task = SimpleNamespace(get_inputs=lambda: [torch.ones(4)])
    worker.model = lambda x: (time.sleep(0.4), x * 2)[1]
    warmup.start()
    reply = Checks(worker).run({"input_seed": 1})
    found = reply["evidence"]
    assert found["threads_after"] <= found["threads_before"], found
    assert torch.equal(reply["output"], 2 * vary_inputs([torch.ones(4)], 1)[0])


class _ScriptedWorkers:
    """A run's workers whose candidate answers each call with the next scripted reply."""

    def __init__(self, replies: list) -> None:
        self.replies, self.calls = replies, 0

    def call(self, worker, cmd, timeout, fields, expect=None):
        self.calls += 1
        return self.replies[self.calls - 1]


class _Verifier(RunVerification):
    """The verify stage's candidate call over scripted replies of the candidate's worker."""

    def __init__(self, records: list) -> None:
        replies = [{"output": 0, "aliases": [], "evidence": {"kernels": k, "flags_before": {}, "flags_after": {}}}
                   for k in records]
        run = SimpleNamespace(judge=None, cfg=JudgeConfig(), verdict=Verdict(status="ok"), cand="candidate",
                              solution=_solution(**{"kernels__k.cu": CUDA_SOURCE, "model_new.py": ""}))
        super().__init__(run, _ScriptedWorkers(replies))

    @property
    def calls(self) -> int:
        return self.workers.calls


KERNEL = {"name": "void tiled_kernel<4>(float*)", "device_ms": 0.2, "op": ""}


def test_a_lost_kernel_record_is_recorded_again():
    verifier = _Verifier([[], None, [KERNEL]])
    got = verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert got["evidence"]["kernels"] == [KERNEL] and verifier.calls == 3
    assert "none of the solution's kernels in 2 of 3 call(s)" in verifier.verdict.notes[-1]


def test_a_record_without_the_solutions_kernels_is_recorded_again():
    # Other activity survived (a copy's kernel) but the profiler dropped the solution's launch.
    copy = {"name": "void at::native::vectorized_elementwise_kernel<4>(int)", "device_ms": 0.01, "op": "aten::copy_"}
    verifier = _Verifier([[copy], [copy, KERNEL]])
    got = verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert got["evidence"]["kernels"] == [copy, KERNEL] and verifier.calls == 2
    assert "in 1 of 2 call(s)" in verifier.verdict.notes[-1]


def test_a_forward_that_never_runs_its_kernels_is_still_refused():
    # A decoy whose __global__s never run: every attempt records only the library's kernel, and
    # the last record is judged as it is.
    gemm = {"name": "sm90_xmma_gemm_f32f32", "device_ms": 1.0, "op": ""}
    verifier = _Verifier([[gemm]] * PROFILE_ATTEMPTS)
    verifier.run.solution = _solution(**{"kernels__k.cu": CUDA_SOURCE, "kernels__gemm.cpp": "cublasSgemm(h);"})
    got = verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.calls == PROFILE_ATTEMPTS and verifier.verdict.status == "ok"
    rules = [v.rule for v in evidence.assess_kernels(got["evidence"]["kernels"], verifier.run.solution, "m")]
    assert rules == ["own_kernels_idle"]


def test_a_record_made_again_is_still_judged_on_what_it_holds():
    # A cheat leaves its own kernels out of the profiled call, which would be made again, and runs
    # ATen's kernels directly in it: that record is judged (unattributed kernels) all the same.
    stub = {"name": "void at::native::vectorized_elementwise_kernel<4>(int)", "device_ms": 1.0, "op": ""}
    verifier = _Verifier([[stub], [KERNEL]])
    with pytest.raises(RunStopped):
        verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.calls == 1 and verifier.verdict.status == "forbidden"
    assert "unattributed_kernels" in verifier.verdict.error


def test_a_record_of_a_profiler_that_failed_is_not_malformed():
    verifier = _Verifier([None, [KERNEL]])
    verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.calls == 2 and verifier.verdict.status == "ok"


def test_a_record_holding_the_solutions_kernel_is_taken_at_once():
    verifier = _Verifier([[KERNEL], [KERNEL]])
    verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.calls == 1 and verifier.verdict.notes == []


def test_a_solution_without_kernels_of_its_own_is_not_recorded_again():
    gemm = {"name": "sm90_xmma_gemm_f32f32", "device_ms": 1.0, "op": ""}
    verifier = _Verifier([[gemm], [gemm]])
    verifier.run.solution = _solution(**{"kernels__gemm.cpp": "cublasSgemm(h);", "model_new.py": ""})
    verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.calls == 1


def test_thread_counts_wait_for_the_profilers_background_start(monkeypatch):
    # The background start of the profiler (recording.warm_profiler) starts threads while it runs;
    # a worker's call waits for it before counting, so those threads are not laid at forward's door.
    started, release = threading.Event(), threading.Event()

    def slow_start() -> None:
        started.set()
        release.wait(5)
        threading.Thread(target=time.sleep, args=(0.5,), name="as-cupti", daemon=True).start()

    warmup = threading.Thread(target=slow_start, daemon=True)
    monkeypatch.setattr(recording, "_warmup", warmup)
    warmup.start()
    started.wait(5)
    threading.Timer(0.2, release.set).start()
    t0 = time.perf_counter()
    recording.profiler_ready()
    assert time.perf_counter() - t0 >= 0.15 and not warmup.is_alive()
    # What the start began is running before the call's first count, not born inside the call.
    assert "as-cupti" in [t.name for t in threading.enumerate()]


def test_a_forward_that_runs_no_kernel_keeps_its_empty_record():
    verifier = _Verifier([[]] * PROFILE_ATTEMPTS)
    got = verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert got["evidence"]["kernels"] == [] and verifier.calls == PROFILE_ATTEMPTS  # judged on it: kernels idle


def test_a_profiler_that_fails_every_time_refuses_the_solution():
    verifier = _Verifier([None] * PROFILE_ATTEMPTS)
    with pytest.raises(RunStopped):
        verifier._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert verifier.verdict.status == "runtime_error" and "profiler failed" in verifier.verdict.error


def test_calls_without_a_kernel_record_are_made_once():
    verifier = _Verifier([[]])
    verifier._run_candidate(1, "none", {"ops": True, "kernels": False})
    assert verifier.calls == 1 and verifier.verdict.notes == []
    unrecorded = _Verifier([[]])
    del unrecorded.workers.replies[0]["evidence"]["kernels"]  # a worker that took no record
    unrecorded._run_candidate(1, "none", {"ops": True, "kernels": True})
    assert unrecorded.calls == 1


# -- threads and flags ----------------------------------------------------------------------------------
def _settled_thread_count() -> int:
    """The process's thread count once it holds still: a thread an earlier test joined may still
    be exiting, and would cancel out the one started here (seen once under xdist)."""
    count = recording.thread_count()
    for _ in range(40):
        time.sleep(0.05)
        count, previous = recording.thread_count(), count
        if count == previous:
            break
    return count


def test_a_thread_left_running_is_seen():
    before = _settled_thread_count()
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        (violation,) = evidence.assess_threads(before, recording.thread_count(), "model_new.py")
        assert violation.rule == "thread_left_running"
    finally:
        stop.set()
        worker.join()
    time.sleep(0.05)  # a joined Python thread's OS thread may take a moment to exit
    assert evidence.assess_threads(before, recording.thread_count(), "model_new.py") == []


def test_flipped_numerics_flags_are_seen():
    before = recording.numerics_flags()
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        (violation,) = evidence.assess_flags(before, recording.numerics_flags(), "model_new.py")
    finally:
        torch.set_float32_matmul_precision(previous)
    assert violation.rule == "flags_changed" and "float32_matmul_precision" in violation.message


# -- the task audit -------------------------------------------------------------------------------------
def test_audit_flags_a_task_whose_outputs_are_constant():
    audit = TaskAudit(1e-2, 1e-2)
    for _ in range(3):
        audit.add(torch.full((16,), 2.0), identity_passes=False)
    assert set(audit.findings()) == {"constant", "fixed_output"}


def test_audit_passes_a_task_with_informative_outputs():
    audit = TaskAudit(1e-2, 1e-2)
    for _ in range(3):
        audit.add(torch.randn(64, 64), identity_passes=False)
    assert audit.findings() == []


def test_audit_sees_zeros_passing_only_when_the_norm_test_is_loosened():
    tiny = [torch.softmax(torch.randn(2, 32768), -1) for _ in range(3)]  # every value far below 1e-2
    strict, loose = TaskAudit(1e-2, 1e-2), TaskAudit(1e-2, 1e-2, norm_rtol=10.0)
    for out in tiny:
        strict.add(out, False)
        loose.add(out, False)
    assert "zeros" not in strict.findings()
    assert "zeros" in loose.findings()


# -- the physical floor ---------------------------------------------------------------------------------
def test_floor_is_the_time_to_write_the_output():
    peaks = Peaks(bytes_per_s=1e12, flops_per_s=1e15)
    assert floor_ms({"output_bytes": 4e9, "flops": 0.0}, peaks, slack=1.0) == pytest.approx(4.0)
    assert floor_ms({"output_bytes": 4e9, "flops": 0.0}, peaks, slack=4.0) == pytest.approx(1.0)
    # The reference's arithmetic bounds nothing: a solution may find a cheaper algebra.
    assert floor_ms({"output_bytes": 0.0, "flops": 2e15}, peaks, slack=4.0) == 0.0


def test_workload_counts_matmul_flops_and_output_bytes():
    model = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)
    work = count_workload(model, [x], [model(x)])
    assert work["flops"] == 2 * 16 * 64 * 32
    assert work["output_bytes"] == 16 * 32 * 4


# -- input variation ------------------------------------------------------------------------------------
def test_input_transforms_touch_only_floating_tensors():
    x, idx = torch.rand(1000), torch.arange(5)
    up, same = transform_inputs([x, idx], "scale_up")
    assert torch.equal(up, x * 4) and torch.equal(same, idx)
    (shifted,) = transform_inputs([x], "shift")
    assert float(shifted.min()) < 0 < float(shifted.max())  # a ReLU can no longer be the identity
    assert transform_inputs([x], "none")[0] is x


def test_perturbed_parameters_leave_their_default_init():
    norm = torch.nn.LayerNorm(256)
    perturb_parameters(norm, seed=7)
    assert not torch.allclose(norm.weight, torch.ones(256), atol=0.05)
    assert not torch.allclose(norm.bias, torch.zeros(256), atol=0.01)
    again = torch.nn.LayerNorm(256)
    perturb_parameters(again, seed=7)
    assert torch.equal(norm.weight, again.weight)  # same seed, same weights in every process


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_parameters_on_the_gpu_are_perturbed_there_alike():
    # drawn on the parameter's device (a GEMM's 67M values in milliseconds), the same for a seed
    first, second = (torch.nn.Linear(512, 512).cuda() for _ in range(2))
    second.load_state_dict(first.state_dict())
    default = first.weight.detach().clone()
    perturb_parameters(first, seed=11)
    perturb_parameters(second, seed=11)
    assert first.weight.device.type == "cuda"
    assert torch.equal(first.weight, second.weight) and torch.equal(first.bias, second.bias)
    assert not torch.allclose(first.weight, default, atol=1e-3)


# -- sandbox --------------------------------------------------------------------------------------------
PROBE = """
import os, sys
home, hidden = sys.argv[1], sys.argv[2]
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError:
        return "denied"
print(attempt(lambda: open(os.path.join(home, "ok"), "w").close()),
      attempt(lambda: open("/tmp/cuda-agent-sandbox-probe-%d" % os.getpid(), "w").close()),
      attempt(lambda: open(os.path.join(hidden, "secret")).read()),
      attempt(lambda: open("/etc/hostname").read() if os.path.exists("/etc/hostname") else None),
      attempt(lambda: os.kill(os.getppid(), 0)))
"""


@pytest.mark.skipif(abi_version() < 1, reason="Landlock is not available in this kernel")
def test_landlock_confines_writes_and_hides_paths(tmp_path):
    home, hidden = tmp_path / "home", tmp_path / "hidden"
    home.mkdir()
    hidden.mkdir()
    (hidden / "secret").write_text("baselines")
    ruleset = build_ruleset([home], readable=[], hidden=[hidden])
    try:
        policy = SandboxPolicy(isolate_network=False, landlock_fd=ruleset.fd)
        result = subprocess.run([sys.executable, "-I", "-c", PROBE, str(home), str(hidden)],
                                preexec_fn=make_preexec(policy), capture_output=True, text=True, timeout=60)
    finally:
        ruleset.close()
    words = result.stdout.split()
    assert words[:4] == ["allowed", "denied", "denied", "allowed"], result.stderr
    if abi_version() >= 6:
        assert words[4] == "denied"  # no signals to the judge


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_root_candidates_lose_every_capability():
    policy = SandboxPolicy(isolate_network=False, drop_capabilities=True)
    result = subprocess.run(["sh", "-c", "grep CapEff /proc/self/status"], preexec_fn=make_preexec(policy),
                            capture_output=True, text=True, timeout=30)
    assert int(result.stdout.split()[1], 16) == 0


def test_recording_thread_count_is_the_os_view():
    # Other threads of the test process (a pool winding down) may start or end meanwhile: one of
    # a few tries sees exactly the one thread started here.
    seen = []
    for _ in range(5):
        before = recording.thread_count()
        done = threading.Event()
        thread = threading.Thread(target=done.wait)
        thread.start()
        time.sleep(0.01)
        seen.append(recording.thread_count() - before)
        done.set()
        thread.join()
        if seen[-1] == 1:
            break
    assert seen[-1] == 1, seen


def test_kernels_in_an_anonymous_namespace_are_the_solutions_own():
    solution = _solution(**{"kernels__k.cu": "namespace {\n__global__ void fused_vec4(float* y) {}\n}"})
    kernels = [{"name": "void (anonymous namespace)::fused_vec4(float*)", "device_ms": 1.0, "op": ""}]
    assert evidence.assess_kernels(kernels, solution, "model_new.py") == []


def test_a_cast_to_lower_precision_is_compute_a_plain_copy_is_not():
    x = torch.randn(16)
    _, ops = recording.record_ops(lambda: (x.to(torch.bfloat16), x.double(), x.clone()))
    assert evidence.forbidden_ops(ops) == ["aten::_to_copy[to lower precision]"]
    target = torch.empty(16, dtype=torch.float16)
    _, ops = recording.record_ops(lambda: target.copy_(x))
    assert evidence.forbidden_ops(ops) == ["aten::copy_[to lower precision]"]
