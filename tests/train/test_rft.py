"""RFT rows: one crafted trajectory per filter rule, and the kept rows loaded by verl's dataset."""

from __future__ import annotations

import json

import pytest

from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.train.rft import RULES, RFTFilter, find_trajectories, rft_rows, without_nulls
from cuda_agent.train.rows import DatasetError, read_parquet, write_parquet


def call(name, args, cid="c0"):
    return {"id": cid, "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


def trajectory(path, calls, *, stop="finished", reward=3, ended=True):
    """An agent's trajectory: each item of ``calls`` a turn's call, or a list of one turn's calls."""
    with TrajectoryWriter(path) as w:
        w.write({"type": "header", "t": 0, "version": 1, "episode_id": path.stem,
                 "task": {"name": "t", "sha256": "x", "source": ""}, "model": "m", "provider": "p",
                 "backend": "cpu", "settings": {}, "started_at": ""})
        w.write({"type": "message", "t": 0, "turn": 0, "message": {"role": "system", "content": "skill"}})
        w.write({"type": "message", "t": 0, "turn": 0, "message": {"role": "user", "content": "task"}})
        for turn, made in enumerate(calls, 1):
            made = made if isinstance(made, list) else [made]
            w.write({"type": "message", "t": turn, "turn": turn,
                     "message": {"role": "assistant", "content": "", "tool_calls": made}})
            for c in made:
                w.write({"type": "tool", "t": turn, "turn": turn, "call": c, "is_error": False, "duration_s": 0,
                         "verdict": None, "data": {},
                         "message": {"role": "tool", "content": f"ok: {c['id']}", "tool_call_id": c["id"],
                                     "name": c["name"]}})
        if reward is not None:
            w.write({"type": "best", "t": 9, "turn": 1, "stage": "profile", "correct": reward > 0,
                     "speedup_vs_compile": 2.0, "speedup_vs_eager": 2.0, "reward": reward, "files": {}})
        if ended:
            w.write({"type": "end", "t": 9, "turn": len(calls), "stop_reason": stop, "elapsed_s": 9, "usage": {},
                     "best": None})
    return path


GOOD = [call("write", {"path": "model_new.py", "content": "x"}), call("profile", {}), call("finish", {})]
CASES = {
    "kept": dict(calls=GOOD),
    "unfinished": dict(calls=GOOD, ended=False),
    "budget_overrun": dict(calls=GOOD, stop="max_turns"),
    "unknown_tool": dict(calls=[call("compile_and_pray", {})] + GOOD),
    "malformed_call": dict(calls=[call("write", '{"path": "model_new.py"')] + GOOD),
    "repeated_calls": dict(calls=[call("read", {"path": "model.py"})] * 3 + GOOD),
    "outcome": dict(calls=GOOD, reward=-1),
}


def test_each_rule_drops_its_trajectory_and_the_report_counts_it(tmp_path):
    paths = [trajectory(tmp_path / name / "trajectory.jsonl", **case) for name, case in CASES.items()
             for _ in [(tmp_path / name).mkdir()]]
    rows, report = rft_rows(find_trajectories([tmp_path]))
    assert report.trajectories == len(paths) and report.kept == 1
    assert report.dropped == {rule: 1 for rule in RULES}
    (row,) = rows
    assert row["reward"] == 3.0 and "kept" in row["trajectory"]
    assistant = [m for m in row["messages"] if m["role"] == "assistant"]
    assert assistant[0]["tool_calls"][0]["function"] == {"name": "write",
                                                         "arguments": GOOD[0]["arguments"]}
    assert [m["role"] for m in row["messages"]][:3] == ["system", "user", "assistant"]
    assert {t["function"]["name"] for t in row["tools"]} >= {"write", "profile", "finish"}


def test_outcome_threshold_and_repeat_length_are_settings(tmp_path):
    path = trajectory(tmp_path / "trajectory.jsonl", [call("read", {"path": "a"})] * 3 + GOOD, reward=1)
    assert rft_rows([path], RFTFilter(max_repeats=4))[1].kept == 1
    assert rft_rows([path], RFTFilter(max_repeats=4, min_reward=1))[1].dropped["outcome"] == 1


def test_no_trajectories_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetError, match="no trajectory.jsonl"):
        find_trajectories([tmp_path])


def test_rows_load_with_verls_multiturn_sft_dataset_without_parquets_nulls(tmp_path, tiny_tokenizer_dir):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from cuda_agent.train.verl_sft_dataset import RFTDataset

    (tmp_path / "t").mkdir()
    rows, _ = rft_rows([trajectory(tmp_path / "t" / "trajectory.jsonl", GOOD)])
    path = write_parquet(rows, tmp_path / "rft.parquet")
    assert read_parquet(path)[0]["tools"][-1]["function"]["parameters"]["properties"].get("path", 0) is None
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    tokenizer.chat_template = qwen2_5_chat_template  # a real tool-calling template
    config = OmegaConf.create({"max_length": 200000, "truncation": "error", "messages_key": "messages",
                               "tools_key": "tools", "pad_mode": "no_padding"})
    plain = MultiTurnSFTDataset([str(path)], tokenizer, config)
    cleaned = RFTDataset([str(path)], tokenizer, config)
    item = cleaned[0]
    assert item["input_ids"].shape == item["loss_mask"].shape
    assert 0 < int(item["loss_mask"].sum()) < item["input_ids"].numel()  # the assistant's tokens only
    assert cleaned.tools[0] == without_nulls(plain.tools[0]) and "None" not in json.dumps(cleaned.tools[0])
    text = tokenizer.decode(item["input_ids"])
    assert '"name": "profile"' in text and "null" not in text.split("</tools>")[0]
    # the arguments render as the object the verl loop shows the model in rollouts, not as JSON text
    assert '"arguments": {"path": "model_new.py"' in text and '"arguments": "{' not in text


LOOP_LOG = "cuda_agent.verl_loop/1"


def loop_entry(task="t", *, stop="finished", reward=3, run=None):
    """One line of the verl agent loop's log (verl_loop.CudaAgentLoop._log)."""
    messages = [{"role": "system", "content": "skill"}, {"role": "user", "content": "task"}]
    for i, c in enumerate(GOOD):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}]})
        messages.append({"role": "tool", "content": "ok", "tool_call_id": f"c{i}"})
    entry = {"format": LOOP_LOG, "task": {"name": task, "sha256": "x"}, "reward": reward, "stop_reason": stop,
             "messages": messages, "best": {"type": "best", "reward": reward, "correct": reward > 0, "files": {}}}
    if run:
        entry["run"] = run
    return json.dumps(entry)


def test_a_loop_trajectory_that_filled_its_token_budget_is_an_overrun(tmp_path):
    log = tmp_path / "trajectories-1.jsonl"
    log.write_text(loop_entry() + "\n" + loop_entry(stop="max_response_length") + "\n")
    rows, report = rft_rows([log])
    assert report.kept == 1 and report.dropped["budget_overrun"] == 1


def test_a_torn_line_costs_that_line_only(tmp_path):
    log = tmp_path / "trajectories-1.jsonl"
    log.write_text(loop_entry()[:-40] + "\n" + loop_entry() + "\n" + loop_entry()[:25] + "\n" + loop_entry() + "\n")
    rows, report = rft_rows([log])
    assert report.kept == 2 and len(report.unreadable) == 2 and report.trajectories == 4
    assert all(":1:" in u or ":3:" in u for u in report.unreadable)


def test_a_rerun_of_collection_replaces_its_trajectories_instead_of_doubling_them(tmp_path):
    folder = tmp_path / "trajectories"
    folder.mkdir()
    # the first run: two workers; the rerun: one worker, sampling both tasks again
    (folder / "trajectories-11.jsonl").write_text(loop_entry("a", run="001") + "\n" + loop_entry("b", run="001") + "\n")
    (folder / "trajectories-12.jsonl").write_text(loop_entry("a", run="001") + "\n")
    (folder / "trajectories-13.jsonl").write_text(loop_entry("a", run="002") + "\n" + loop_entry("b", run="002") + "\n")
    rows, report = rft_rows(find_trajectories([tmp_path]))
    assert report.kept == 2 and report.superseded == 3 and sorted(r["task_id"] for r in rows) == ["a", "b"]
    # trajectories without a run (the training stages' logs) all count
    (folder / "trajectories-14.jsonl").write_text(loop_entry("c") + "\n" + loop_entry("c") + "\n")
    assert rft_rows(find_trajectories([tmp_path]))[1].kept == 4


def test_one_converter_gives_the_request_the_rows_and_the_chat_template_forms():
    from cuda_agent.llm.messages import Message, ToolCall, openai_message, with_object_arguments

    reply = Message("assistant", "", [ToolCall("c0", "read", '{"path": "model.py"}'), ToolCall("c1", "bash", '{"cut')])
    result = Message("tool", "ok", tool_call_id="c0", name="read")
    row = [openai_message(reply), openai_message(result)]
    assert row[0]["tool_calls"][0]["function"]["arguments"] == '{"path": "model.py"}' and row[1]["name"] == "read"
    rendered = [openai_message(reply, object_arguments=True), openai_message(result, object_arguments=True)]
    assert rendered[0]["tool_calls"][0]["function"]["arguments"] == {"path": "model.py"}
    assert rendered[0]["tool_calls"][1]["function"]["arguments"] == '{"cut'  # malformed: kept as written
    assert with_object_arguments(row) == rendered  # what RFT trains on is what the loop shows the model
    request = openai_message(reply, request=True), openai_message(result, request=True)
    assert request[0]["content"] is None and "name" not in request[1]


def multi_call_trajectory(path):
    """Five tool calls in the first turn (as the demo's expert makes them), then finish."""
    calls = [call("read", {"path": "model.py"}, "a"), call("glob", {"pattern": "*"}, "b"),
             call("write", {"path": "model_new.py", "content": "x"}, "c"),
             call("write", {"path": "kernels/k.cpp", "content": "y"}, "d"), call("profile", {}, "e")]
    return trajectory(path, [calls, call("finish", {}, "f")])


def multi_call_dataset(tmp_path, tiny_tokenizer_dir, template):
    import trl.chat_template_utils as templates
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from cuda_agent.train.verl_sft_dataset import RFTDataset

    (tmp_path / "t").mkdir()
    (row,), report = rft_rows([multi_call_trajectory(tmp_path / "t" / "trajectory.jsonl")])
    assert report.kept == 1 and sum(len(m.get("tool_calls") or []) for m in row["messages"]) == 6
    path = write_parquet([row], tmp_path / "rft.parquet")
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    tokenizer.chat_template = getattr(templates, template)  # the real template of a family users train
    config = OmegaConf.create({"max_length": 200000, "truncation": "error", "messages_key": "messages",
                               "tools_key": "tools", "pad_mode": "no_padding"})
    return RFTDataset([str(path)], tokenizer, config), tokenizer, config, path


@pytest.mark.parametrize("template", ["qwen2_5_chat_template", "qwen3_training_chat_template"])
def test_turns_with_several_tool_calls_tokenize_as_the_template_renders_them(tmp_path, tiny_tokenizer_dir, template):
    pytest.importorskip("verl")
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    dataset, tokenizer, config, path = multi_call_dataset(tmp_path, tiny_tokenizer_dir, template)
    item = dataset[0]  # verl's own check: the turns add up to the whole conversation as the template renders it
    messages, tools = dataset._build_messages(dataset.dataframe.iloc[0].to_dict()), dataset.tools[0]
    whole = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)
    whole = whole["input_ids"] if hasattr(whole, "keys") else whole
    assert item["input_ids"].tolist() == list(whole)
    # the loss is on the assistant's two turns: every call, none of the results
    trained = tokenizer.decode(item["input_ids"][item["loss_mask"].bool()])
    assert all(f'"{name}"' in trained for name in ("read", "glob", "write", "profile", "finish"))
    assert "ok:" not in trained and "task" not in trained and "skill" not in trained
    # these templates group a turn's tool results in one block, which verl's dataset, message by
    # message, cannot tokenize
    with pytest.raises(AssertionError):
        MultiTurnSFTDataset([str(path)], tokenizer, config)[0]


def test_a_template_that_takes_one_call_a_turn_says_so_and_what_to_do(tmp_path, tiny_tokenizer_dir):
    pytest.importorskip("verl")
    from cuda_agent.train.verl_sft_dataset import TemplateRefused

    dataset, *_ = multi_call_dataset(tmp_path, tiny_tokenizer_dir, "llama3_1_chat_template")
    with pytest.raises(TemplateRefused, match="single tool-calls.*up to 5 tool calls.*text protocol"):
        dataset[0]


def test_rft_on_trl_trains_the_model_on_its_own_tool_template_by_default(tmp_path, tiny_tokenizer_dir):
    # TRL's agentic GRPO samples tool calls through the model's chat template: RFT must train on the
    # same rendering (native), not on the agent's text protocol, or GRPO starts from a model that
    # never saw the format it is sampled in.
    import shutil

    import trl.chat_template_utils as templates
    from transformers import AutoTokenizer

    from cuda_agent.train.trl_sft import SFTSettings, run_sft, sft_dataset

    assert SFTSettings().tool_format == "native"
    model = tmp_path / "model"
    shutil.copytree(tiny_tokenizer_dir, model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = templates.qwen3_training_chat_template  # has the assistant-mask markers
    tokenizer.save_pretrained(model)
    (tmp_path / "t").mkdir()
    (row,), _ = rft_rows([multi_call_trajectory(tmp_path / "t" / "trajectory.jsonl")])
    (example,) = sft_dataset([row], "native").to_list()
    rendered = tokenizer.apply_chat_template(example["messages"], tools=example["tools"], tokenize=True,
                                             return_dict=True, return_assistant_tokens_mask=True)
    trained = tokenizer.decode([t for t, m in zip(rendered["input_ids"], rendered["assistant_masks"]) if m])
    assert trained.count("<tool_call>") == 6 and all(f'"{n}"' in trained for n in ("read", "glob", "write", "finish"))
    assert "<tool_result>" not in tokenizer.decode(rendered["input_ids"])  # the text protocol's, not here
    final = run_sft(str(model), [row], tmp_path / "out", SFTSettings(epochs=1, max_length=None, save_steps=100))
    assert (final / "config.json").is_file()
