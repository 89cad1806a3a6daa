"""The judge pool on a local Ray cluster with several CPU workers: the same verdicts as the local
pool, a worker killed mid-judge with its verdict arriving once, backpressure, time limits, clear
errors, and candidates that cannot reach Ray."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_agent.cluster import make_pool
from cuda_agent.errors import ClusterError
from cuda_agent.solution import load_solution

ray = pytest.importorskip("ray")
from cuda_agent.cluster.ray_pool import RayJudgePool, RayWorkerPool, WorkerLost  # noqa: E402

from .conftest import start_local_cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.usefixtures("local_cluster")]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _outcome(verdict) -> tuple:
    return verdict.status, verdict.correct, sorted({v.rule for v in verdict.violations}), verdict.reward > 0


# What a judge in this process gives for each (status, correct, rules, paid; tests/judge/test_judge_cpu.py
# judges them so): the Ray pool's judges, in its actors, must give the same.
LOCAL_OUTCOMES = {
    "cpu/correct": ("ok", True, [], True),
    "cpu/wrong_values": ("incorrect", False, [], False),
    "cpu/compile_error": ("compile_error", False, [], False),
    "cpu/attacks/forged_reply": ("forbidden", False, ["io_access", "library_use", "reference_access"], False),
}


def test_the_ray_pool_gives_the_local_pools_verdicts(task, judge_config, fixture_solution):
    solutions = [fixture_solution(n) for n in LOCAL_OUTCOMES]

    async def judge_all(pool):
        assert (await pool.check_reference(task)).ok
        return await asyncio.gather(*(pool.evaluate(task, s, "profile") for s in solutions))

    with make_pool("ray", judge_config(), 2) as pool:
        assert isinstance(pool, RayJudgePool) and pool.max_concurrent == 2 and pool.backend == "cpu"
        remote = asyncio.run(judge_all(pool))
    assert [_outcome(v) for v in remote] == list(LOCAL_OUTCOMES.values())
    assert remote[0].correct and remote[0].reward >= 1 and not remote[1].correct


def test_a_worker_killed_mid_judge_is_judged_again_once(task, judge_config, fixture_solution):
    solution = fixture_solution("cpu/correct")
    with RayJudgePool(judge_config(), workers=2) as pool:
        workers = pool.workers

        async def main():
            job = asyncio.ensure_future(pool.evaluate(task, solution, "profile"))
            while not workers.busy:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # the judge process is starting its workers
            (index,) = workers.busy
            actor = workers.placement[index]["pid"]
            judge = _children(actor)
            os.kill(actor, signal.SIGKILL)
            verdicts = await asyncio.gather(job)
            started = time.monotonic()
            while workers.down and time.monotonic() - started < 120:  # Ray restarts the actor
                await asyncio.sleep(0.5)
            return verdicts, index, actor, judge

        verdicts, index, actor, judge = asyncio.run(main())
        assert len(verdicts) == 1 and verdicts[0].correct and verdicts[0].status == "ok"
        assert workers.retried == 1
        # the lost actor's judge process went with it: no orphan goes on judging
        assert judge and all(_gone(p) for p in judge)
        # the restarted actor is back in the pool, a new process
        assert workers.down == 0 and workers.placement[index]["pid"] != actor


def _gone(pid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _alive(pid)


def test_a_full_pool_makes_callers_wait():
    pool = RayWorkerPool(os.getpid, (), 2, max_pending=3)
    try:
        async def main():
            started = time.monotonic()
            results = await asyncio.gather(*(pool.run(time.sleep, (0.5,)) for _ in range(8)))
            return results, time.monotonic() - started

        results, seconds = asyncio.run(main())
        assert results == [None] * 8
        assert pool.most_pending == 3 and pool.pending == 0
        assert seconds >= 8 * 0.5 / 2  # two workers: the jobs ran two at a time, not all at once
    finally:
        pool.close()


def test_time_limits_and_dying_jobs():
    pool = RayWorkerPool(os.getpid, (), 1)
    try:
        with pytest.raises(TimeoutError, match="within 1 s"):
            asyncio.run(pool.run(time.sleep, (30,), timeout_s=1.0))
        with pytest.raises(WorkerLost, match="died twice"):
            asyncio.run(pool.run(os._exit, (3,)))
        assert asyncio.run(pool.run(abs, (-2,))) == 2  # the worker carries on with fresh processes
        with pytest.raises(ValueError, match="invalid literal"):
            asyncio.run(pool.run(int, ("x",)))  # the job's own exception reaches the caller
        assert asyncio.run(pool.run(abs, (-3,))) == 3 and not pool.busy  # and the worker is free again
    finally:
        pool.close()


def test_clear_errors_for_bad_settings(judge_config):
    with pytest.raises(ClusterError, match="needs GPUs"):
        RayJudgePool(judge_config(backend="cuda"))
    with pytest.raises(ClusterError, match="--pool takes one of local, ray"):
        make_pool("dask", judge_config())
    with pytest.raises(ClusterError, match="needs --pool ray"):
        make_pool("local", judge_config(), ray_address="10.0.0.1:6379")


def test_an_address_nobody_answers_says_how_to_start_a_cluster():
    from cuda_agent.cluster.ray_pool import connect

    ray.shutdown()
    try:
        with pytest.raises(ClusterError, match="no Ray cluster answers at 127.0.0.1:9"):
            connect("127.0.0.1:9")
        with pytest.raises(ClusterError, match="HOST:PORT"):
            connect("nowhere")
    finally:
        start_local_cluster()


PROBE = '''
import json, os, socket

import torch
import torch.nn as nn

SESSION = {session!r}
GCS = {gcs!r}
found = {{"env": sorted(k for k in os.environ if k.startswith("RAY"))}}
try:
    found["session_listing"] = os.listdir(SESSION)[:3]
except OSError as exc:
    found["session_listing"] = "refused: " + type(exc).__name__
for name in ("raylet", "plasma_store"):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(os.path.join(SESSION, "sockets", name))
        found[name] = "connected"
    except OSError as exc:
        found[name] = "refused: " + type(exc).__name__
host, port = GCS.rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=3).close()
    found["gcs"] = "connected"
except OSError as exc:
    found["gcs"] = "refused: " + type(exc).__name__
raise RuntimeError("PROBE" + json.dumps(found) + "END")  # the verdict shows the message


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return x
'''


def test_a_candidate_cannot_reach_ray(task, judge_config, tmp_path):
    """Ray's environment is not passed on, its session directory is hidden, Unix-domain sockets
    (raylet, object store) are refused by the seccomp filter, and TCP (the GCS) by Landlock or
    the network namespace."""
    pytest.importorskip("cuda_agent.judge.seccomp").compiled_filter()
    context = ray.get_runtime_context()
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "model_new.py").write_text(PROBE.format(session=str(session), gcs=context.gcs_address))
    solution = load_solution(probe)
    with RayJudgePool(replace(judge_config(), static_checks=False), workers=1) as pool:
        verdict = asyncio.run(pool.evaluate(task, solution, "verify"))
    text = verdict.details + verdict.error + verdict.feedback
    assert "PROBE" in text, text[-2000:]
    found = json.loads(text.rsplit("PROBE", 1)[1].split("END", 1)[0])
    assert found["env"] == []
    assert all(str(found[k]).startswith("refused") for k in ("session_listing", "raylet", "plasma_store", "gcs")), found
