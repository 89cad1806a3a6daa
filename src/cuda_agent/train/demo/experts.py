"""Expert trajectories for rejection fine-tuning, made by the real agent loop and the real judge.

A scripted client replies with the expert's turns; everything else (workspace, tools, judge
verdicts, the trajectory file, the exported best solution) is the agent's own. Episodes that
ended are not run again, so a rerun of the demo reuses them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from ...agent.env import EnvSettings
from ...agent.loop import AgentSettings, Episode, EpisodeResult
from ...judge.pools import JudgePool
from ...llm.messages import Completion, Message, Usage
from ...task import Task
from .family import expert_replies

# The expert mostly ports the reference's approach (slow, reward 1) and finds the one-pass kernel
# once (reward 3): RFT then teaches correct solutions, and leaves speed for RL to find. Two more
# episodes are ones the RFT filters must drop.
PLAN = (("slow", 0), ("slow", 1), ("slow", 2), ("fast", 1), ("broken", 0), ("looping", 2))


class ScriptedClient:
    """An LLM client that answers with a fixed list of replies, one per request."""

    def __init__(self, replies: list[Message], model: str = "scripted-expert") -> None:
        self.model = model
        self.replies = list(replies)
        self.requests = 0

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        started = time.perf_counter()
        reply = self.replies[min(self.requests, len(self.replies) - 1)]
        self.requests += 1
        prompt = sum(m.estimated_tokens() for m in messages)
        return Completion(reply, Usage(prompt, reply.estimated_tokens()), "tool_calls" if reply.tool_calls else "stop",
                          time.perf_counter() - started, model=self.model)

    async def aclose(self) -> None:
        return None


def expert_directory(out: Path, kind: str, task: Task) -> Path:
    return out / f"{task.name}-{kind}"


async def run_experts(tasks: list[Task], pool: JudgePool, out: Path) -> list[EpisodeResult]:
    results = []
    for kind, index in PLAN:  # one at a time: the judge's timing is steadier without company
        task = tasks[index % len(tasks)]
        replies = expert_replies(kind, pool.backend)
        episode = Episode(task, ScriptedClient(replies), pool, expert_directory(out, kind, task),
                          settings=AgentSettings(EnvSettings(max_turns=len(replies))), provider="scripted",
                          episode_id=f"{task.name}-{kind}")
        results.append(await episode.run())
    return results


def collect(tasks: list[Task], pool: JudgePool, out: Path) -> list[EpisodeResult]:
    return asyncio.run(run_experts(tasks, pool, out))


__all__ = ["PLAN", "ScriptedClient", "collect"]
