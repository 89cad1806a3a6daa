"""One place decides each process's sandbox (sandbox.policy_for): the trusted reference worker
keeps its privileges, and every untrusted kind (candidate worker, build, agent shell) is
confined, with the CUDA backend's exceptions for the driver."""

from __future__ import annotations

import pytest

from cuda_agent.judge import sandbox
from cuda_agent.judge.sandbox import ProcessKind, policy_for

UNTRUSTED = (ProcessKind.CANDIDATE, ProcessKind.BUILD, ProcessKind.AGENT_SHELL)


@pytest.fixture(params=[0, 1000], ids=["root", "user"])
def uid(request, monkeypatch):
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: request.param)
    return request.param


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_only_the_reference_is_trusted_and_it_alone_keeps_its_privileges(uid, backend):
    assert [s for s in ProcessKind if s.trusted] == [ProcessKind.REFERENCE]
    reference = policy_for(ProcessKind.REFERENCE, backend=backend)
    assert not (reference.isolate_ipc or reference.drop_capabilities or reference.new_pid_namespace)
    assert reference.landlock_fd == -1 and reference.seccomp_program is None
    for kind in UNTRUSTED:
        policy = policy_for(kind, backend=backend, landlock_fd=7, seccomp_program=b"filter")
        assert policy.isolate_ipc and policy.landlock_fd == 7
        assert policy.drop_capabilities == (uid == 0), kind  # root keeps no capability
        assert policy.run_as is None
    assert policy_for(ProcessKind.AGENT_SHELL, backend=backend, isolate_network=False).isolate_network  # never opened


def test_a_candidate_runs_as_another_user_or_without_capabilities(uid):
    other = policy_for(ProcessKind.CANDIDATE, backend="cpu", run_as=(65534, 65534))
    assert other.run_as == (65534, 65534) and not other.drop_capabilities
    kept = policy_for(ProcessKind.CANDIDATE, backend="cpu", drop_privileges=False)
    assert not kept.drop_capabilities  # the judge's switch, for debugging only
    assert policy_for(ProcessKind.CANDIDATE, backend="cpu", seccomp_program=b"f").seccomp_program == b"f"
    assert policy_for(ProcessKind.AGENT_SHELL, backend="cpu", seccomp_program=b"f").seccomp_program is None


def test_on_cuda_no_pid_namespace_and_the_candidates_worker_is_the_subreaper(uid):
    root = uid == 0
    cpu, cuda = (policy_for(ProcessKind.CANDIDATE, backend=b) for b in ("cpu", "cuda"))
    assert cpu.new_pid_namespace == root and cpu.subreaper == "launcher"
    assert not cuda.new_pid_namespace and cuda.subreaper == "worker"
    assert policy_for(ProcessKind.AGENT_SHELL, backend="cpu", pid_namespaces=True).new_pid_namespace
    assert not policy_for(ProcessKind.AGENT_SHELL, backend="cuda", pid_namespaces=True).new_pid_namespace
    assert not policy_for(ProcessKind.AGENT_SHELL, backend="cpu", pid_namespaces=False).new_pid_namespace
    assert not policy_for(ProcessKind.BUILD).new_pid_namespace and policy_for(ProcessKind.BUILD).subreaper == ""


def test_kinds_whose_sandbox_depends_on_the_backend_need_it():
    for kind in (ProcessKind.CANDIDATE, ProcessKind.AGENT_SHELL):
        with pytest.raises(ValueError, match="backend"):
            policy_for(kind)


def test_a_process_is_trusted_by_the_kind_its_policy_was_made_for(tmp_path):
    from cuda_agent.judge.run_workers import worker_name
    from cuda_agent.judge.worker_process import WorkerSpec

    def spec(policy) -> WorkerSpec:
        return WorkerSpec(name="any name at all", run_dir=tmp_path, policy=policy, env={})

    assert spec(policy_for(ProcessKind.REFERENCE, backend="cpu")).trusted
    for kind in UNTRUSTED:
        assert policy_for(kind, backend="cpu").kind is kind and not spec(policy_for(kind, backend="cpu")).trusted
    assert not spec(sandbox.SandboxPolicy()).trusted  # a policy that does not say whose it is: a candidate's
    # the name is only what the verdict calls it
    assert [worker_name(ProcessKind.REFERENCE, "eager"), worker_name(ProcessKind.CANDIDATE, "eager")] == ["reference-eager", "candidate"]
