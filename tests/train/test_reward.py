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



def test_a_task_of_many_workloads_has_the_time_of_one_judgement_for_each(demo_tasks):
    from dataclasses import replace

    from cuda_agent.workloads import declare_sizes, judge_runs

    class Pool:  # a judge run that takes 0.6 s, whatever the task
        backend = "cpu"

        async def evaluate(self, task, solution, stage):
            await asyncio.sleep(0.6)
            raise RuntimeError("judged")

    plain = demo_tasks[0]
    source = "batch_size = 8\n" + plain.source + declare_sizes([4, 8, 16])
    shapes = replace(plain, source=source)
    assert judge_runs(plain) == 1 and judge_runs(shapes) == 3 + 2  # declared and held-out
    reward = JudgeReward(Pool(), timeout_s=0.25)
    cut = asyncio.run(reward.score(files_reply(FAST), plain))
    assert cut.fields["status"] == "timeout" and "longer than" in cut.reason
    judged = asyncio.run(reward.score(files_reply(FAST), shapes))
    assert judged.fields["status"] == "judge_error" and "judged" in judged.reason

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


class GroupPool:
    """A pool that judges groups: records each call, gives every solution its own reward."""

    backend = "cpu"

    def __init__(self, fault: str | None = None):
        self.calls: list[tuple[str, list[str]]] = []
        self.fault = fault

    async def evaluate(self, task, solution, stage):
        raise AssertionError("a pool that judges groups is asked for groups")

    async def evaluate_many(self, task, solutions, stage):
        from cuda_agent.judge.verdict import Verdict

        self.calls.append((task.name, [s.sha256 for s in solutions]))
        if self.fault == "hang":
            await asyncio.sleep(30)
        if self.fault == "fail":
            raise RuntimeError("worker lost")
        return [Verdict(status="ok", task=task.name, task_sha256=task.sha256, solution_sha256=s.sha256,
                        backend="cpu", correct=True, reward=1 + int(s.sha256, 16) % 3) for s in solutions]


def test_the_continuous_and_sol_rewards_are_refused_where_nothing_is_timed():
    # t_compile / t of a correct reply judged at verify has no t: every such reply would score -1
    with pytest.raises(ValueError, match="needs the candidate timed"):
        JudgeReward(object(), kind="continuous", stage="verify")
    with pytest.raises(ValueError, match="the sol reward needs the candidate timed"):
        JudgeReward(object(), kind="sol", stage="verify")
    assert JudgeReward(object(), kind="continuous", stage="profile").kind == "continuous"
    assert JudgeReward(object(), kind="milestone", stage="verify").stage == "verify"


def test_a_group_is_split_over_the_rewards_concurrency_in_order():
    from cuda_agent.cluster.pool import split_group

    assert split_group(list(range(16)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert split_group(list(range(5)), 2) == [[0, 1, 2], [3, 4]]
    assert split_group([1, 2], 4) == [[1], [2]] and split_group([], 4) == []


def test_a_tasks_replies_are_judged_in_one_group_run_each_scored_as_its_own(demo_tasks):
    pool = GroupPool()
    reward = JudgeReward(pool, concurrency=1)
    fast, slow = files_reply(FAST), files_reply(family.solution_files("slow"))
    a, b = demo_tasks[0], demo_tasks[1]
    results = asyncio.run(reward.score_many([fast, slow, fast, "prose", slow], [a, a, a, a, b]))
    # one run per task, each solution once within it; the bad reply never reaches the judge
    assert sorted((name, len(shas)) for name, shas in pool.calls) == sorted([(a.name, 2), (b.name, 1)])
    expected = {s.sha256: 1.0 + int(s.sha256, 16) % 3 for s in map(solution_from_reply, (fast, slow))}
    assert results[0].score == results[2].score == expected[solution_from_reply(fast).sha256]
    assert results[1].score == results[4].score == expected[solution_from_reply(slow).sha256]
    assert results[3].score == -1.0 and "no usable solution" in results[3].reason
    assert [r.cached for r in results] == [False, False, True, False, False]
    assert reward.judge_calls == 3
    # judged once: a second batch asks the judge nothing
    again = asyncio.run(reward.score_many([fast, slow], [a, a]))
    assert [r.cached for r in again] == [True, True] and len(pool.calls) == 2


def test_a_group_run_that_hangs_or_fails_scores_every_reply_minus_one(demo_tasks):
    replies = [files_reply(FAST), files_reply(family.solution_files("slow"))]
    hung = asyncio.run(JudgeReward(GroupPool("hang"), timeout_s=0.2, concurrency=1).score_many(replies, [demo_tasks[0]] * 2))
    assert [r.score for r in hung] == [-1.0, -1.0] and all("group of 2" in r.reason for r in hung)
    failed = asyncio.run(JudgeReward(GroupPool("fail")).score_many(replies, [demo_tasks[0]] * 2))
    assert [r.score for r in failed] == [-1.0, -1.0] and all("worker lost" in r.reason for r in failed)
    # group=False: one run per reply, through evaluate (which this pool refuses)
    (alone,) = asyncio.run(JudgeReward(GroupPool(), group=False).score_many(replies[:1], [demo_tasks[0]]))
    assert alone.score == -1.0 and "asked for groups" in alone.reason


def test_a_verdict_whose_speed_did_not_settle_is_judged_again_not_kept(demo_tasks, tmp_path):
    from cuda_agent.judge.verdict import Verdict

    class Pool:
        backend = "cpu"

        def __init__(self):
            self.calls = 0

        async def evaluate(self, task, solution, stage):
            self.calls += 1
            unsettled = self.calls == 1  # the first run's timing did not settle; the next one's did
            return Verdict(status="ok", task=task.name, task_sha256=task.sha256, solution_sha256=solution.sha256,
                           backend="cpu", correct=True, reward=1 if unsettled else 3,
                           speedup_withheld="the timing was not stable enough to claim a speedup" if unsettled else None)

    log = tmp_path / "rewards.jsonl"
    pool = Pool()
    reward = JudgeReward(pool, log_path=log)
    reply = files_reply(FAST)
    first = asyncio.run(reward.score(reply, demo_tasks[0]))
    assert first.score == 1.0 and not first.settled
    assert not JudgeReward(pool, log_path=log).cache  # a rerun does not read it back either
    second = asyncio.run(reward.score(reply, demo_tasks[0]))  # judged again: it settles
    assert second.score == 3.0 and second.settled and not second.cached and pool.calls == 2
    third = asyncio.run(reward.score(reply, demo_tasks[0]))  # kept now
    assert third.score == 3.0 and third.cached and pool.calls == 2


class SolPool(GroupPool):
    """Gives every solution a correct verdict with a SOL score against torch.compile."""

    async def evaluate_many(self, task, solutions, stage):
        verdicts = await super().evaluate_many(task, solutions, stage)
        for v in verdicts:
            v.reward_sol = 0.625
        return verdicts


def test_the_sol_reward_pays_the_verdicts_sol_score(demo_tasks):
    (result,) = asyncio.run(JudgeReward(SolPool(), kind="sol").score_many([files_reply(FAST)], demo_tasks[:1]))
    assert result.score == 0.625 and result.fields["reward_sol"] == 0.625
