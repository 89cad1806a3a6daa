"""No place outside the candidate's own scratch directory is writable from the candidate.

The worker probes every shared place (each in-memory file system, the temporary directories,
every world-writable directory near the root) and the judge records what it could write; a
candidate that relies on /dev/shm to pass something on fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cuda_agent.judge.landlock import abi_version
from cuda_agent.judge.sandbox import shared_places, writable_devices, writable_outside
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="Landlock is not available in this kernel")


def test_shared_places_include_the_usual_ones():
    places = {str(p) for p in shared_places()}
    for usual in ("/tmp", "/dev/shm", "/var/tmp"):
        if os.path.isdir(usual):
            assert usual in places


def test_the_probe_sees_what_an_unconfined_process_can_write(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert str(tmp_path) in writable_outside(home)  # beside its home
    assert "/tmp" in writable_outside(home) or not os.access("/tmp", os.W_OK)


def test_only_device_nodes_are_granted_under_dev():
    for device in writable_devices():
        assert device.parent == Path("/dev")
        assert device.name not in ("shm", "mqueue")


@pytest.fixture(scope="module")
def task(fixtures_dir):
    return load_task(fixtures_dir / "tasks" / "scale_bias_relu.py")


@pytest.mark.slow
@needs_landlock
def test_a_confined_candidate_can_write_nowhere_outside_its_home(cpu_judge, task, fixtures_dir):
    verdict = cpu_judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    assert verdict.status == "ok", verdict.error
    record = verdict.isolation["candidate"]
    assert record["writable_outside"] == [], record
    assert record["filesystem_confined"] is True
    assert "device nodes opened for writing" in record["filesystem"]


@pytest.mark.slow
def test_without_confinement_the_record_names_the_open_places(judge_config, task, fixtures_dir):
    from cuda_agent.judge.judge import Judge

    judge = Judge(judge_config(confine_filesystem=False))
    verdict = judge.evaluate(task, load_solution(fixtures_dir / "solutions" / "cpu" / "correct"), stage="verify")
    record = verdict.isolation["candidate"]
    assert record["filesystem_confined"] is False
    expected = [p for p in ("/tmp", "/dev/shm") if os.path.isdir(p) and os.access(p, os.W_OK)]
    assert set(expected) <= set(record["writable_outside"]), record["writable_outside"]


@pytest.mark.slow
@needs_landlock
def test_a_candidate_that_stashes_in_dev_shm_fails(judge_config, task, fixtures_dir, tmp_path):
    root = tmp_path / "stash"
    shutil.copytree(fixtures_dir / "solutions" / "cpu" / "correct", root)
    model = root / "model_new.py"
    model.write_text(model.read_text().replace(
        "        super().__init__()\n",
        "        super().__init__()\n        open('/dev/shm/cuda-agent-stash', 'w').write('state')\n"))
    from cuda_agent.judge.judge import Judge

    verdict = Judge(judge_config(static_checks=False)).evaluate(task, load_solution(root), stage="verify")
    assert verdict.status == "runtime_error", verdict.status
    assert "Permission denied" in (verdict.error + verdict.details)
    assert not os.path.exists("/dev/shm/cuda-agent-stash")
