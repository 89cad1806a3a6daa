"""A small dataset built end to end on the CPU: compose, filter in workers, write, resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.errors import SynthesisError
from cuda_agent.synth.synthesis import (LOG_NAME, PAPER_MIX, RunState, SynthOptions, Synthesizer,
                                       next_category, read_log, run_synthesis)
from cuda_agent.synth.records import FILTERS, Candidate, Outcome
from cuda_agent.synth.seeds import save_catalogue

KERNELBENCH = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
WINDOW = (0.005, 1.0)  # small tasks, so that every check runs quickly on the CPU


@pytest.fixture(scope="module")
def catalogue(torch_crawl):
    return torch_crawl


def options(out: Path, n: int, **extra) -> SynthOptions:
    settings = dict(device="cpu", workers=2, window_ms=WINDOW, max_tensor_bytes=1 << 24,
                    kernelbench=str(KERNELBENCH), include_transformers=False)
    return SynthOptions(n=n, out=out, **{**settings, **extra})


def seeded(out: Path, catalogue) -> Path:
    save_catalogue(catalogue, out / "seeds.json")  # the crawl is tested elsewhere; skip it here
    return out


@pytest.mark.slow
def test_small_dataset_end_to_end_then_resumed(tmp_path, catalogue):
    out = seeded(tmp_path / "ds", catalogue)
    state, _, written = run_synthesis(options(out, 4))
    assert len(state.accepted) == 4
    for outcome in state.accepted:
        assert [f.name for f in outcome.filters] == list(FILTERS)
        assert outcome.eager_ms > 0 and outcome.compile_ms > 0 and outcome.max_similarity <= 0.9
    log = (out / LOG_NAME).read_text().splitlines()
    assert len(log) == len(state.outcomes)

    import datasets

    rows = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf1"))
    assert rows.num_rows == 4
    assert {"code", "ops", "data_source", "eager_ms", "compile_ms", "filters"} <= set(rows.column_names)
    assert all(isinstance(r["ops"], list) and r["data_source"] == f"torch#{len(r['ops'])}" for r in rows)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["accepted"] == 4 and stats["candidates"] == len(state.outcomes)
    assert written["card"].read_text().count("|") > 20 and (out / "eager_ms.png").stat().st_size > 1000

    # A crash cut the last line in half; the rerun asks for more and goes on after it.
    with (out / LOG_NAME).open("a") as fh:
        fh.write('{"candidate": {"index": 99')
    state2, _, _ = run_synthesis(options(out, 6))
    assert len(state2.accepted) == 6
    lines = (out / LOG_NAME).read_text().splitlines()
    assert lines[: len(log)] == log  # nothing redone
    assert lines[len(log)] == '{"candidate": {"index": 99'  # the cut line, ended and then ignored
    indices = [json.loads(l)["candidate"]["index"] for l in lines[len(log) + 1:]]
    assert indices and min(indices) > max(json.loads(l)["candidate"]["index"] for l in log)
    assert len(indices) == len(set(indices))
    assert datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf2")).num_rows == 6


def test_a_resume_with_other_settings_is_refused(tmp_path, catalogue):
    out = seeded(tmp_path / "ds", catalogue)
    from cuda_agent.synth.synthesis import check_settings

    check_settings(out, options(out, 2))
    with pytest.raises(SynthesisError, match="window_ms"):
        check_settings(out, options(out, 2, window_ms=(1.0, 100.0)))


def test_next_category_follows_the_paper_mix():
    state = RunState()
    picks = []
    for i in range(1000):
        category = next_category(PAPER_MIX, state)
        picks.append(category)
        cand = Candidate(index=i, code="", ops=[], data_source=category, composer="offline")
        state.outcomes.append(Outcome(candidate=cand, filters=[], accepted=True))
    for category, share in PAPER_MIX.items():
        assert abs(picks.count(category) / 1000 - share) < 0.002


def test_duplicates_and_stochastic_ops_are_caught_before_any_worker(tmp_path, catalogue):
    out = seeded(tmp_path / "ds", catalogue)
    synth = Synthesizer(options(out, 2), catalogue)
    code = "import torch\nclass Model:\n    pass\n"
    first = synth._static_filters(Candidate(0, code, ["torch.abs"], "torch#1", "offline"))
    again = synth._static_filters(Candidate(1, code + "\n# same program\n", ["torch.abs"], "torch#1", "offline"))
    assert [f.passed for f in first] == [True, True]
    assert not again[-1].passed and again[-1].measurement["duplicate_of"] == "synth-000000"
    noisy = synth._static_filters(Candidate(2, "x = F.dropout(x)", ["F.dropout"], "torch#1", "offline"))
    assert [f.name for f in noisy] == ["deterministic_ops"] and not noisy[0].passed


def test_read_log_skips_a_cut_line(tmp_path):
    log = tmp_path / LOG_NAME
    outcome = Outcome(Candidate(5, "code", ["a"], "torch#1", "offline"), [], False)
    log.write_text(json.dumps(outcome.to_dict()) + "\n" + '{"candidate": {"ind')
    state = read_log(log)
    assert len(state.outcomes) == 1 and state.next_index == 6


def test_bad_options_say_what_to_do(tmp_path, catalogue):
    with pytest.raises(SynthesisError, match="-n"):
        Synthesizer(options(tmp_path, 0), catalogue)
    with pytest.raises(SynthesisError, match="window"):
        Synthesizer(options(tmp_path, 1, window_ms=(5.0, 1.0)), catalogue)


@pytest.mark.slow
def test_cli_builds_a_dataset(tmp_path, catalogue):
    out = seeded(tmp_path / "cli", catalogue)
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent.cli", "synth", "-n", "2", "--out", str(out), "--device", "cpu",
         "--window-ms", "0.005,1", "--max-tensor-gb", "0.015", "-j", "2", "--no-transformers"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "accepted 2 of" in proc.stdout and (out / "data" / "train.parquet").exists()
    bad = subprocess.run([sys.executable, "-m", "cuda_agent.cli", "synth", "-n", "2", "--out", str(out),
                          "--window-ms", "fast"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "MIN,MAX" in bad.stderr


LLM_TASK = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = F.gelu(x)
        return torch.cumsum(x, dim=-1)


batch_size = {batch}
features = 64


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_llm_composed_tasks_go_through_the_same_filters(tmp_path, catalogue, monkeypatch):
    from agent.servers import OpenAIServer, Reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    seeds = [s for s in catalogue.seeds if s.name in ("F.gelu", "torch.cumsum")]
    two_ops = type(catalogue)(seeds=seeds, excluded=[])
    out = tmp_path / "llm"
    save_catalogue(two_ops, out / "seeds.json")

    def reply(messages, index):  # one program per request, each with its own batch size
        return Reply("```python\n" + LLM_TASK.format(batch=16 + index) + "```")

    with OpenAIServer(reply) as server:
        opts = options(out, 2, model="scripted-model", base_url=server.url, mix={"torch#2": 1.0},
                       kernelbench=None, window_ms=(1e-4, 10.0))
        state, _, _ = run_synthesis(opts)
        prompts = [str(c) for c in server.conversations]
    assert len(state.accepted) == 2
    assert all(o.candidate.composer == "llm:scripted-model" for o in state.outcomes)
    assert all(sorted(o.candidate.ops) == ["F.gelu", "torch.cumsum"] for o in state.accepted)
    assert all([f.name for f in o.filters] == list(FILTERS) for o in state.accepted)
    assert "F.gelu" in prompts[0] and "torch.cumsum" in prompts[0]


def test_kinds_that_cannot_be_made_leave_the_mix(tmp_path, catalogue):
    synth = Synthesizer(options(seeded(tmp_path / "ds", catalogue), 2), catalogue)  # no transformers seeds
    assert "transformers#1" not in synth.mix
    assert abs(sum(synth.mix.values()) - 1.0) < 1e-9
    assert synth.mix["torch#2"] > PAPER_MIX["torch#2"]


def test_a_bad_kernelbench_path_is_refused_before_anything_is_recorded(tmp_path, catalogue):
    out = seeded(tmp_path / "ds", catalogue)
    with pytest.raises(Exception, match="does not exist"):
        run_synthesis(options(out, 1, kernelbench=str(tmp_path / "missing")))
    assert not (out / "run.json").exists()  # the corrected command can still use this folder


@pytest.mark.slow
def test_a_hanging_candidate_is_recorded_as_a_worker_failure(tmp_path, catalogue, monkeypatch):
    from agent.servers import OpenAIServer, Reply

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    seeds = [s for s in catalogue.seeds if s.name in ("F.gelu", "torch.cumsum")]
    out = tmp_path / "hang"
    save_catalogue(type(catalogue)(seeds=seeds, excluded=[]), out / "seeds.json")
    hanging = LLM_TASK.format(batch=16).replace("        x = F.gelu(x)\n",
                                                "        x = F.gelu(x)\n        while True:\n            x = x\n")
    with OpenAIServer(lambda messages, index: Reply("```python\n" + hanging + "```")) as server:
        opts = options(out, 1, model="scripted-model", base_url=server.url, mix={"torch#2": 1.0},
                       kernelbench=None, window_ms=(1e-4, 10.0), timeout_s=5.0, max_candidates=1)
        state, _, _ = run_synthesis(opts)
    (outcome,) = state.outcomes
    assert not outcome.accepted and outcome.rejected_by == "worker"
    assert "did not finish within 5 s" in outcome.filters[-1].reason
    assert [f.name for f in outcome.filters] == ["deterministic_ops", "duplicate", "worker"]
