"""The demo, end to end on the CPU: a tiny model learns from the real judge.

One run (about ten minutes on two cores) serves every test here: rejection fine-tuning takes the
untrained model's mean judge reward to correct solutions, GRPO then raises it further beyond noise
(more fast solutions, fewer slow ones), and the trained model, as the agent's policy through the
local Hugging Face client, writes a solution the judge accepts. A rerun resumes and redoes nothing.
"""

from __future__ import annotations

import json
import time

import pytest

from cuda_agent.agent.trajectory import load_trajectory
from cuda_agent.train.demo.run import DemoRun, DemoSettings, corpus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def demo(train_pool, tmp_path_factory):
    pytest.importorskip("trl")
    out = tmp_path_factory.mktemp("demo")
    return out, DemoRun(out, train_pool, DemoSettings(), say=print).all()


def test_rft_takes_the_untrained_model_to_correct_solutions(demo):
    _, summary = demo
    e = summary["evaluations"]
    assert e["base"]["mean"] == -1.0  # random weights write nothing the judge can take
    correct = sum(n for reward, n in e["rft"]["counts"].items() if float(reward) > 0)
    # Most sampled replies are correct. How many depends on the CPU's arithmetic and on the times in
    # the judge's feedback the experts saw (two runs on one CPU gave 46 and 47 of 48), so the bar is
    # a majority, and the test is the p-value.
    assert correct > 0.5 * e["rft"]["n"] and summary["rft_vs_base"]["p_value"] < 1e-6
    assert summary["rft_report"]["kept"] == 4 and summary["rft_report"]["rewards"] == {"1": 3, "3": 1}
    assert summary["rft_report"]["dropped"]["repeated_calls"] == 1 and summary["rft_report"]["dropped"]["outcome"] == 1


def test_grpo_raises_the_mean_reward_beyond_noise_by_choosing_the_fast_kernel(demo):
    _, summary = demo
    e = summary["evaluations"]
    assert e["grpo"]["mean"] > e["rft"]["mean"] and summary["grpo_vs_rft"]["p_value"] < 0.05
    assert summary["fast_share"]["grpo"] > summary["fast_share"]["rft"]
    assert len(summary["grpo_steps"]) == DemoSettings().grpo_steps


def test_every_reward_came_from_the_judge_on_generated_code(demo):
    out, summary = demo
    entries = [json.loads(line) for line in (out / "rewards.jsonl").read_text().splitlines()]
    judged = [e for e in entries if e["judged"]]
    assert summary["judge_calls"] >= 2 and judged
    assert {e["fields"]["status"] for e in judged if e["score"] > 0} == {"ok"}
    assert all(e["fields"]["candidate_ms"] > 0 for e in judged if e["score"] > 0)
    evaluation = json.loads((out / "eval" / "grpo.json").read_text())
    assert len(evaluation["scores"]) == 3 * DemoSettings().eval_per_task
    assert any("<tool_call>" in reply for reply in evaluation["sample_replies"])


def test_the_trained_model_as_the_agent_writes_a_solution_the_judge_accepts(demo):
    _, summary = demo
    agent = summary["agent_episode"]
    assert agent["best"] is not None and agent["best"]["correct"] and agent["best"]["reward"] >= 1
    trajectory = load_trajectory(f"{agent['directory']}/trajectory.jsonl")
    assert trajectory.header["provider"] == "hf" and trajectory.best["files"]["model_new.py"]
    assert json.loads(open(f"{agent['directory']}/best/verdict.json").read())["correct"] is True


def test_the_reward_curve_is_written_and_a_rerun_redoes_nothing(demo, train_pool):
    out, summary = demo
    curve = json.loads((out / "reward_curve.json").read_text())
    assert len(curve["grpo_steps"]) == len(summary["grpo_steps"]) and (out / "reward_curve.png").stat().st_size > 0
    started = time.monotonic()
    again = DemoRun(out, train_pool, DemoSettings(), say=print).all()
    assert time.monotonic() - started < 120
    assert again["evaluations"] == summary["evaluations"] and again["judge_calls"] == 0


def test_the_tokenizer_corpus_does_not_depend_on_measured_times():
    # The experts' conversations carry the judge's timings, which differ from run to run; a
    # vocabulary learned from them would give every run a differently shaped random model.
    def conversation(times: str) -> dict:
        return {"messages": [{"role": "user", "content": "Make it fast."},
                             {"role": "assistant", "content": "Profiling.", "tool_calls": None},
                             {"role": "user", "content": f"candidate {times}"}], "tools": []}

    rows = [{"prompt": [{"role": "user", "content": "Make it fast."}]}]
    first = corpus(rows, [conversation("63.6 ms  eager 2.991 ms (0.05x)")], "cpu")
    second = corpus(rows, [conversation("126.47 ms  eager 3.5 ms (0.03x)")], "cpu")
    assert first == second and "candidate 0 ms  eager 0 ms (0x)" in first
    assert corpus(rows, [conversation("fast")], "cpu") != first  # the words still count


def test_the_judges_numbers_are_masked_in_what_the_model_is_fine_tuned_on():
    # Two runs' feedback differs only in measured times: what RFT trains on must not.
    from cuda_agent.train.demo.run import judge_numbers_masked

    def row(candidate_ms: str) -> dict:
        return {"task_id": "t", "messages": [
            {"role": "user", "content": "rows = 128"},
            {"role": "assistant", "content": "x = 2", "tool_calls": None},
            {"role": "tool", "content": f"candidate {candidate_ms} ms  eager 3.864 ms (0.03x)"}]}

    first, second = judge_numbers_masked([row("112.4")]), judge_numbers_masked([row("75.33")])
    assert first == second
    assert first[0]["messages"][2]["content"] == "candidate 0 ms  eager 0 ms (0x)"
    assert first[0]["messages"][:2] == row("1")["messages"][:2]  # the prompt and the reply as they were
