"""Fixtures for the agent's tests: a real judge pool on the cpu backend and scripted episodes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

import pytest

from cuda_agent.llm import make_client
from cuda_agent.llm.retry import RetryPolicy
from cuda_agent.agent.loop import AgentSettings, Episode, EpisodeResult
from cuda_agent.cluster import LocalJudgePool

CORRECT = Path(__file__).resolve().parents[1] / "fixtures" / "solutions" / "cpu" / "correct"
FAST_RETRY = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(scope="session")
def judge_pool(judge_config):
    with LocalJudgePool(judge_config(), max_concurrent=2) as pool:
        yield pool


@pytest.fixture(scope="session")
def correct_files() -> dict[str, str]:
    """The fixture task's correct cpu solution, as the files an agent would write."""
    return {str(p.relative_to(CORRECT)): p.read_text() for p in sorted(CORRECT.rglob("*")) if p.is_file()}


@pytest.fixture
def run_episode(task, judge_pool, tmp_path) -> Callable[..., EpisodeResult]:
    """Play one episode against a scripted server: ``run_episode(server, provider, **settings)``."""

    def run(server, provider: str = "openai", directory: Path | None = None, **settings) -> EpisodeResult:
        client = make_client(provider, "scripted-model", base_url=server.url, api_key="test-key",
                             retry=FAST_RETRY, timeout_s=settings.pop("timeout_s", 30.0))
        episode = Episode(task, client, judge_pool, directory or tmp_path / "episode", provider=provider,
                          settings=AgentSettings(**settings))

        async def go() -> EpisodeResult:
            try:
                return await episode.run()
            finally:
                await client.aclose()

        return asyncio.run(go())

    return run
