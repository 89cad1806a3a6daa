"""Candidates run as an unprivileged user only where that user can run Python; otherwise the judge
says why and what to change, and never fails with a traceback.

The case this guards: a judge running as root with its interpreter (or the interpreter a virtual
environment links to) under a home directory of mode 700. The unprivileged user cannot execute
it, and starting a worker as that user fails before any Python runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from cuda_agent.judge.sandbox import SandboxPolicy, unprivileged_ids, unreachable_for_others, world_reachable
from cuda_agent.judge.worker_process import WorkerError, WorkerProcess, WorkerSpec

needs_root = pytest.mark.skipif(os.geteuid() != 0 or unprivileged_ids() is None,
                                reason="dropping privileges needs root and an unprivileged user")


@pytest.fixture
def open_dir():
    """A directory every user can enter (pytest's own temporary directories are private)."""
    path = Path(tempfile.mkdtemp(prefix="cuda-agent-privileges-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def private_python(open_dir: Path) -> Path:
    """This interpreter, as a link inside a directory only its owner may enter."""
    private = open_dir / "home"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    (private / "bin").mkdir()
    link = private / "bin" / "python"
    link.symlink_to(Path(sys.executable).resolve())
    if sys.prefix != sys.base_prefix:
        # In a virtual environment the link must find it (pyvenv.cfg above its bin/, the packages
        # under lib/), or it runs the bare base interpreter, which has no torch.
        (private / "pyvenv.cfg").write_text((Path(sys.prefix) / "pyvenv.cfg").read_text())
        (private / "lib").symlink_to(Path(sys.prefix) / "lib")
    return link


def test_a_link_into_a_private_directory_is_unreachable(open_dir: Path):
    private, public = open_dir / "private", open_dir / "public"
    private.mkdir(mode=0o700)
    public.mkdir(mode=0o755)
    os.chmod(private, 0o700)
    os.chmod(public, 0o755)
    secret = private / "lib.py"
    secret.write_text("")
    os.chmod(secret, 0o644)
    (public / "lib.py").symlink_to(secret)
    shared = public / "shared.py"
    shared.write_text("")
    os.chmod(shared, 0o644)
    (private / "link.py").symlink_to(shared)
    assert world_reachable(shared)
    assert not world_reachable(public / "lib.py")   # resolves into the private directory
    assert not world_reachable(private / "link.py")  # its own directory cannot be entered
    os.chmod(shared, 0o600)
    assert not world_reachable(shared)


def test_the_interpreter_and_its_import_path_are_checked(private_python: Path):
    missing = unreachable_for_others(str(private_python), [])
    assert missing and missing[0] == str(private_python)


@needs_root
def test_a_worker_that_cannot_run_its_interpreter_fails_with_advice(tmp_path: Path, private_python: Path):
    # An exec'd worker (fork=False): a forked one never runs the interpreter as that user, which is
    # why the judge checks the install is reachable (Judge.unreachable_for_candidates) either way.
    run = tmp_path / "run"
    run.mkdir()
    spec = WorkerSpec(name="candidate", run_dir=run, policy=SandboxPolicy(isolate_network=False,
                                                                          run_as=unprivileged_ids()),
                      env={}, python=str(private_python), fork=False)
    with pytest.raises(WorkerError) as info:
        WorkerProcess(spec)
    assert info.value.kind == "runtime_error"
    assert "could not start the candidate process as uid" in info.value.message
    assert "worker_python" in info.value.message


@needs_root
@pytest.mark.slow
def test_the_judge_runs_candidates_with_capabilities_dropped_instead(judge_config, task, fixture_solution,
                                                                       private_python: Path):
    from cuda_agent.judge.judge import Judge

    verdict = Judge(judge_config(worker_python=str(private_python))).verify(task, fixture_solution("cpu/correct"))
    assert verdict.status == "ok", verdict.feedback
    candidate = verdict.isolation["candidate"]
    assert candidate["uid"] == 0 and candidate["capabilities"] == 0
    assert str(private_python) in candidate["privileges"]
    assert "chmod o+rx" in candidate["privileges"]
