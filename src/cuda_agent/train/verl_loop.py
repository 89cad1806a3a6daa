"""The agent as a verl agent loop: ``@register("cuda_agent")``, driving the same ``KernelEnv``.

verl makes one instance per trajectory and awaits ``run``. Here ``run`` opens a workspace for the
row's task (closed in ``finally``), builds the prompt tokens from the environment's opening
messages and tool schemas with verl's continuous-token builder, and then alternates: generate
through verl's server manager (token in, token out), parse the reply's tool calls in the model's
format (``multi_turn.format``: hermes with the agent's own parser, so that malformed calls come
back to the model as errors, as in the agent loop, instead of being dropped; any other format
verl parses, such as qwen3_coder, gpt-oss or glm, with verl's parser for it), step the
environment, and append the observation's tokens.
``response_mask`` is 1 on the model's tokens and 0 on every token the environment added; the
outcome reward is set on the output, so verl's reward loop is skipped for these rows. verl puts
that reward on the response's last token, and its GAE passes over tokens whose mask is 0: so the
response ends with the last token the model generated (``ends_on_model_token``), also when the
token budget ran out inside a tool's output, where a -1 would otherwise count as 0.

The paper's limits apply: ``multi_turn.max_assistant_turns`` turns (150 by default here) and
``response_length`` tokens after the prompt (model and tool tokens alike; 128k in the agentic
stage). Tool results are summarised by the tools themselves (head and tail kept, the cut said)
up to ``max_tool_chars``, not cut to verl's 256-character default.

Every trajectory is written exactly (messages, token ids, mask, log-probabilities, per-turn
verdicts, the reward) to ``trajectory_dir`` as one JSON line, for rejection fine-tuning.

Extra settings come from the agent-loop config file that registers this class (hydra passes
them to ``__init__``): ``judge`` (backend, concurrency, cache_dir, timing: ``train.pools.make_judge_pool``),
``trajectory_dir``, ``workspace_root``, ``max_tool_chars``, ``run_id`` (the collect stage's run,
logged with each trajectory so that a rerun's trajectories replace this run's in RFT).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .. import paper
from ..agent.env import EnvSettings, KernelEnv
from ..judge.pools import JudgePool
from ..llm.text_protocol import parse_tool_calls
from ..llm.messages import Message, ToolCall, openai_message
from .extras import TrainError, require
from .rft import LOOP_LOG_FORMAT
from .rows import AGENT_NAME, task_of_row
from .pools import judge_pool

require("verl")
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402  (after the check that names the extra)
    AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register)
from verl.experimental.agent_loop.tool_parser import ToolParser  # noqa: E402
from verl.tools.schemas import OpenAIFunctionToolSchema  # noqa: E402

DEFAULT_TURNS = paper.TRAINING_TURNS
DEFAULT_TOOL_CHARS = 28_000
_log_lock = threading.Lock()


def tool_parser(name: str, tokenizer: Any) -> ToolParser | None:
    """verl's parser of the model's tool-call format (``multi_turn.format``); None for hermes, which
    the agent's own parser reads."""
    if name == "hermes":
        return None
    if name not in ToolParser._registry:
        raise TrainError(f"unknown tool-call format {name!r}: verl parses {', '.join(sorted(ToolParser._registry))}")
    return ToolParser.get_tool_parser(name, tokenizer)


def ends_on_model_token(response: list[int], mask: list[int],
                        logprobs: list[float]) -> tuple[list[int], list[int], list[float]]:
    """The response cut after the last token the model generated (mask 1), with its mask and
    log-probabilities (where there are any): the tool tokens after it are context the model is
    never trained on, and verl would put the trajectory's reward on the last of them, where its
    GAE cannot see it. A response without a generated token is left as it is."""
    end = len(mask)
    while end and not mask[end - 1]:
        end -= 1
    if not end:
        return response, mask, logprobs
    return response[:end], mask[:end], logprobs[:end]


def message_dict(message: Message) -> dict[str, Any]:
    """A message as chat templates want it (tool-call arguments as objects), as RFT trains on it."""
    return openai_message(message, object_arguments=True)


@register(AGENT_NAME)
class CudaAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, judge: dict | None = None, trajectory_dir: str | None = None,
                 workspace_root: str | None = None, max_tool_chars: int | None = None, pool: JudgePool | None = None,
                 run_id: str | None = None, reward_kind: str = "milestone", **kwargs: Any) -> None:
        kwargs.pop("tools", None)  # verl's tool list: this loop runs the agent's own tools
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.multi_turn
        self.max_turns = int(multi_turn.max_assistant_turns or DEFAULT_TURNS)
        self.tool_parser = tool_parser(str(multi_turn.format or "hermes"), self.tokenizer)
        self.response_length = int(self.rollout_config.response_length)
        self.max_tool_chars = int(max_tool_chars or DEFAULT_TOOL_CHARS)
        self.pool = pool or judge_pool(judge)
        self.trajectory_dir = Path(trajectory_dir) if trajectory_dir else None
        self.workspace_root = Path(workspace_root) if workspace_root else None
        self.run_id = run_id
        self.reward_kind = reward_kind

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_of_row(kwargs.get("extra_info"))
        settings = EnvSettings(max_turns=self.max_turns, max_tool_chars=self.max_tool_chars)
        directory = self.workspace_root / uuid.uuid4().hex[:16] if self.workspace_root else None
        env = KernelEnv(self.pool, directory, settings=settings, reward_kind=self.reward_kind)
        started = time.monotonic()
        try:
            return await self._episode(env, task, sampling_params, started)
        finally:
            env.close()  # removes a directory it made itself; one under workspace_root goes here
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)

    async def _episode(self, env: KernelEnv, task: Any, sampling_params: dict[str, Any],
                       started: float) -> AgentLoopOutput:
        opening, info = env.reset(task)
        tools = info["tools"]
        chat = [message_dict(m) for m in opening]
        prompt_ids = await self.ct_build_initial_tokens(chat, tools=tools)
        ids, mask, logprobs = list(prompt_ids), [], []
        if self.tool_parser is not None and self.tool_parser.stop_token_ids:
            # a format whose call does not end in the end-of-turn token (Gemma 4's) stops at its own
            stops = list(sampling_params.get("stop_token_ids") or [])
            sampling_params = {**sampling_params, "stop_token_ids": stops + [t for t in self.tool_parser.stop_token_ids
                                                                             if t not in stops]}
        request_id = uuid.uuid4().hex
        turns: list[dict[str, Any]] = []
        generate_s = tools_s = 0.0
        stop = ""
        while not stop:
            t0 = time.monotonic()
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                        sampling_params=sampling_params)
            generate_s += time.monotonic() - t0
            merged, mask, merged_logprobs = await self.ct_merge_assistant_token(
                ids, output.token_ids, mask, logprobs if (logprobs or output.log_probs) else None,
                assistant_logprobs=output.log_probs or None)
            ids = merged.token_ids
            logprobs = merged_logprobs or []
            content, calls = await self._parse(output.token_ids, tools, env.turn + 1)
            reply = Message("assistant", content, calls)
            turn = {"turn": env.turn + 1, "reply": message_dict(reply), "token_ids": list(output.token_ids)}
            chat = chat + [turn["reply"]]
            if len(mask) >= self.response_length:
                stop = "max_response_length"
                turns.append(turn)
                break
            t0 = time.monotonic()
            # verl reports no length stop per turn (its budget is response_length, checked above);
            # a call cut off mid-block still reaches the model as an error from the parser.
            step = await env.step(reply)
            tools_s += time.monotonic() - t0
            turn["observation"] = [message_dict(m) for m in step.observation]
            turn["verdicts"] = [r.output.verdict for r in step.info["records"] if r.output.verdict]
            turns.append(turn)
            stop = step.info["stop_reason"]
            if stop:
                break
            before = chat
            chat = before + turn["observation"]
            merged, mask, merged_logprobs = await self.ct_merge_context_msg(
                before, chat, ids, mask, logprobs or None, tools=tools)
            ids = merged.token_ids
            logprobs = merged_logprobs or []
            if len(mask) >= self.response_length:
                stop = "max_response_length"
        reward = env.outcome_reward()
        length = self.response_length
        response, mask, logprobs = ends_on_model_token(ids[len(prompt_ids):][:length], mask[:length],
                                                       logprobs[:length])
        self._log(task, chat, prompt_ids, response, mask, logprobs, turns, reward, stop, env)
        extra = {"stop_reason": stop, "turns": env.turn, "best": env.best.summary() if env.best else None,
                 "task_id": task.name, "episode_s": time.monotonic() - started}
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids), response_ids=response, response_mask=mask,
            response_logprobs=logprobs or None, reward_score=reward,
            num_turns=2 * len(turns) + 1, metrics=AgentLoopMetrics(generate_sequences=generate_s, tool_calls=tools_s),
            extra_fields=extra)

    async def _parse(self, token_ids: list[int], tools: list[dict[str, Any]], turn: int) -> tuple[str, list[ToolCall]]:
        """A reply's text and tool calls: in the hermes format by the agent's own parser (a malformed
        call comes back to the model as an error, as in the agent loop), in any other by verl's parser
        for that format (which leaves a malformed call out)."""
        if self.tool_parser is None:
            return parse_tool_calls(self.tokenizer.decode(token_ids, skip_special_tokens=True))
        schemas = [OpenAIFunctionToolSchema.model_validate(t) for t in tools]
        content, calls = await self.tool_parser.extract_tool_calls(list(token_ids), schemas)
        return content, [ToolCall(c.tool_call_id or f"call_{turn}_{k}", c.name, c.arguments) for k, c in enumerate(calls)]

    def _log(self, task: Any, chat: list[dict[str, Any]], prompt_ids: list[int], response: list[int],
             mask: list[int], logprobs: list[float], turns: list[dict[str, Any]], reward: float, stop: str,
             env: KernelEnv) -> None:
        if self.trajectory_dir is None:
            return
        entry = {"format": LOOP_LOG_FORMAT, "task": {"name": task.name, "sha256": task.sha256}, "reward": reward,
                 "stop_reason": stop, "messages": chat,
                 "prompt_ids": list(prompt_ids), "response_ids": list(response), "response_mask": list(mask),
                 "response_logprobs": list(logprobs), "turns": turns,
                 "best": env.best.event() if env.best else None, "time": time.time()}
        if self.run_id:
            entry["run"] = self.run_id
        path = self.trajectory_dir / f"trajectories-{os.getpid()}.jsonl"
        with _log_lock:
            self.trajectory_dir.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write(json.dumps(entry, default=str) + "\n")
