"""The reward function: the judge's reward for good replies, -1 with a reason for every bad one."""

from __future__ import annotations

import asyncio
import json

import pytest

from cuda_agent.judge.config import TimingConfig
from cuda_agent.train.demo import family
from cuda_agent.train.extras import TrainError
from cuda_agent.train.replies import ReplyFormatError, solution_from_reply
from cuda_agent.train.reward import JudgeReward

from .conftest import files_reply

FAST = family.solution_files("fast")


def tool_call_reply(files):
    return "".join('<tool_call>' + json.dumps({"name": "write", "arguments": {"path": p, "content": t}}) + "</tool_call>"
                   for p, t in files.items())


MALFORMED = {
    "empty": "",
    "prose only": "I would write a kernel that takes the maximum of each row.",
    "code without paths": "```cpp\nint main() {}\n```",
    "no model_new.py": files_reply({k: v for k, v in FAST.items() if k != "model_new.py"}),
    "path outside the workspace": files_reply({**FAST, "kernels/../../etc/x.cpp": "int x;\n"}),
    "unclosed fence": "model_new.py\n```python\nclass ModelNew: pass",
    "broken tool call json": '<tool_call>{"name": "write", "arguments": {"path": "model_new.py", "content": </tool_call>',
    "tool call of another tool": '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
    "python syntax error": files_reply({**FAST, "model_new.py": "class ModelNew(:\n"}),
    "no ModelNew class": files_reply({**FAST, "model_new.py": "import cuda_extension\nclass Other: pass\n"}),
    "kernels without a binding": files_reply({"model_new.py": FAST["model_new.py"],
                                              "kernels/row_max.cpp": FAST["kernels/row_max.cpp"]}),
    "not a string": None,
    # JSON's escape for a lone surrogate decodes to a str that has no UTF-8 form
    "lone surrogate in a tool call": '<tool_call>{"name": "write", "arguments": {"path": "model_new.py", '
                                     '"content": "x = \\ud800"}}</tool_call>',
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_replies_score_minus_one_with_a_reason_and_never_reach_the_judge(name, train_pool, demo_tasks):
    reward = JudgeReward(train_pool)
    result = asyncio.run(reward.score(MALFORMED[name], demo_tasks[0]))
    assert result.score == -1.0 and result.reason and reward.judge_calls == 0


def test_both_formats_give_the_same_files():
    assert solution_from_reply(files_reply(FAST)).files == FAST
    assert solution_from_reply("Here it is.\n" + tool_call_reply(FAST)).files == FAST
    with pytest.raises(ReplyFormatError, match="model_new.py"):
        solution_from_reply(tool_call_reply({"kernels/row_max.cpp": "x"}))


@pytest.mark.slow
def test_judged_once_per_content_logged_and_reloaded(train_pool, demo_tasks, tmp_path):
    log = tmp_path / "rewards.jsonl"
    reward = JudgeReward(train_pool, concurrency=2, log_path=log)
    fast, slow = files_reply(FAST), tool_call_reply(family.solution_files("slow"))

    async def go():
        return await reward.score_many([fast, fast, tool_call_reply(FAST), slow], [demo_tasks[0]] * 4)

    results = asyncio.run(go())
    assert [r.score for r in results[:3]] == [3.0, 3.0, 3.0], [r.reason for r in results]
    # the slow kernel scores 1; on a machine loaded by other work the judge may refuse its timing
    # as not credible (it fails closed), which this test does not judge
    assert results[3].score == 1.0 or "timing" in results[3].reason, results[3].reason
    assert reward.judge_calls == 2  # the same files in flight at once, or in either format, are judged once
    assert results[0].fields["status"] == "ok" and results[0].fields["candidate_ms"] > 0
    assert sum(r.cached for r in results) == 2
    again = JudgeReward(train_pool, log_path=log)  # a rerun reads the log back
    assert asyncio.run(again.score(fast, demo_tasks[0])).cached and again.judge_calls == 0
    assert len(log.read_text().splitlines()) == 5


def test_a_judge_that_hangs_or_fails_scores_minus_one(demo_tasks):
    class Pool:
        backend = "cpu"

        def __init__(self, fault):
            self.fault = fault

        async def evaluate(self, task, solution, stage):
            if self.fault == "hang":
                await asyncio.sleep(30)
            raise RuntimeError("worker lost")

    hung = asyncio.run(JudgeReward(Pool("hang"), timeout_s=0.2).score(files_reply(FAST), demo_tasks[0]))
    assert hung.score == -1.0 and "longer than" in hung.reason
    failed = asyncio.run(JudgeReward(Pool("fail")).score(files_reply(FAST), demo_tasks[0]))
    assert failed.score == -1.0 and "worker lost" in failed.reason


def record_pid_and_hang(task, solution, stage):
    """A pool process's evaluation that never ends (module level: a spawned process imports it)."""
    import os
    import time
    from pathlib import Path

    Path(os.environ["HANG_PID_FILE"]).write_text(str(os.getpid()))
    time.sleep(120)


def no_judge(config, processes):
    pass


@pytest.mark.slow
def test_the_time_limit_stops_the_judge_instead_of_abandoning_it(demo_tasks, tmp_path, monkeypatch):
    import os
    import time

    from cuda_agent.judge.config import JudgeConfig
    from cuda_agent.train.pools import TrainJudgePool

    class HangingPool(TrainJudgePool):
        start = staticmethod(no_judge)
        run_evaluate = staticmethod(record_pid_and_hang)

    pid_file = tmp_path / "pid"
    monkeypatch.setenv("HANG_PID_FILE", str(pid_file))  # spawned processes inherit the environment
    with HangingPool(JudgeConfig(backend="cpu", cache_dir=tmp_path / "cache"), max_concurrent=1) as pool:
        started = time.monotonic()
        result = asyncio.run(JudgeReward(pool, timeout_s=3).score(files_reply(FAST), demo_tasks[0]))
        assert result.score == -1.0 and "longer than" in result.reason and result.fields["status"] == "timeout"
        assert time.monotonic() - started < 60
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the judge's process still runs after its time limit")


def test_the_reward_pool_takes_the_judge_settings_it_names(tmp_path):
    from cuda_agent.train.pools import make_judge_pool

    with make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "concurrency": 1, "exclusive_timing": True}) as pool:
        assert pool.config.exclusive_timing and pool.config.cache_dir == tmp_path.absolute()
    with make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "concurrency": 1}) as pool:
        assert not pool.config.exclusive_timing
    with make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "concurrency": 1,
                          "timing": {"target_seconds": 0.2, "max_calls": 10}}) as pool:
        assert pool.config.timing.target_seconds == 0.2 and pool.config.timing.max_calls == 10
        assert pool.config.timing.min_calls == TimingConfig().min_calls  # the rest as the default


def test_a_bad_timing_setting_is_named_before_any_pool_starts(tmp_path):
    from cuda_agent.train.pools import make_judge_pool

    with pytest.raises(TrainError, match="no field seconds; it takes .*target_seconds"):
        make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "timing": {"seconds": 1}})
    with pytest.raises(TrainError, match="timing setting target_seconds"):
        make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "timing": {"target_seconds": -1}})
    with pytest.raises(TrainError, match="a mapping of TimingConfig fields"):
        make_judge_pool({"backend": "cpu", "cache_dir": tmp_path, "timing": 0.2})
