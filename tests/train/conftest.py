"""Fixtures for the training tests: a judge pool on the cpu backend, the demo's tasks and solutions."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.train.demo import family
from cuda_agent.train.demo.tiny import build_tiny_model
from cuda_agent.train.pools import TrainJudgePool


@pytest.fixture(scope="session")
def train_pool(judge_config):
    with TrainJudgePool(judge_config(), max_concurrent=2) as pool:
        yield pool


@pytest.fixture(scope="session")
def demo_tasks():
    return family.tasks()


def files_reply(files: dict[str, str]) -> str:
    """A single-turn reply in the files format."""
    return "\n\n".join(f"{path}\n```cpp\n{text}```" for path, text in files.items())


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> Path:
    """The demo's tiny model (tokenizer trained on a small corpus), for tests that need a tokenizer."""
    corpus = [family.solution_files("fast")[p] for p in family.files_of("cpu")] * 5 + [t.source for t in family.tasks()]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), corpus, vocab_size=2048)


@pytest.fixture
def tokenizer(tiny_tokenizer_dir):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    tok.chat_template = qwen2_5_chat_template
    return tok
