"""verl's ``MultiTurnSFTDataset`` for RFT rows: tokenized turn by turn as the chat template renders
the whole conversation, with the nulls Parquet adds taken out again.

verl's dataset renders each message alone and checks that the pieces add up to the whole
conversation. Chat templates that group consecutive tool results in one block (Qwen2.5 and Qwen3
put them all in one user turn) fail that check on every turn with several tool calls, as the
agent's turns often are. This subclass (``data.custom_cls`` in the rft stage) tokenizes a turn at
a time instead: each assistant message, and each run of the environment's messages between two
of them, is the tokens the template adds for it after the message before it, so the pieces add up
to what the template renders for the whole conversation (verl's own check still runs), and the
loss falls on the assistant's tokens after its generation prompt, as in verl's dataset.

Parquet stores the list of tool schemas (and the tool calls) as one struct type, so every tool
reads back with every other tool's parameter names set to null; a chat template would show the
model those nulls. They are dropped after loading, and the tool calls' arguments turned from JSON
text back into objects.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from cuda_agent.llm.messages import with_object_arguments
from cuda_agent.train.rft import without_nulls


class TemplateNotLocal(ValueError):
    """The chat template renders a turn differently depending on turns far before it."""


class TemplateRefused(ValueError):
    """The chat template cannot render the conversation (Llama 3.1's takes one tool call a turn)."""


class RFTDataset(MultiTurnSFTDataset):
    def _read_files_and_process(self) -> None:
        super()._read_files_and_process()
        if self.tools is not None:
            self.tools = [without_nulls(t) for t in self.tools]

    def _build_messages(self, example: dict) -> list:
        # tool-call arguments are JSON text in the rows; chat templates (Qwen's applies tojson) want
        # the object, as the verl loop renders it in rollouts, not the text encoded a second time
        return with_object_arguments(without_nulls(super()._build_messages(example)))

    def _process_single_message(self, index: int, message: dict[str, Any], full_message: list,
                                tools: list[dict[str, Any]] | None = None, enable_thinking: bool | None = None):
        # verl asks message by message, the row's tools with the first; the turns are cut once per row
        turns = getattr(self, "_turns", None)  # (the row's messages, their turns), cut at its first message
        if index == 0 or turns is None or turns[0] != id(full_message):
            self._turns = (id(full_message), turn_tokens(self._render(tools, enable_thinking), full_message))
        ids, loss = self._turns[1][index]
        input_ids = torch.tensor(ids, dtype=torch.long)
        return input_ids, torch.tensor(loss, dtype=torch.long), torch.ones_like(input_ids), {}

    def _render(self, tools: list[dict[str, Any]] | None, enable_thinking: bool | None):
        kwargs = dict(self.apply_chat_template_kwargs)
        if enable_thinking is not None:
            kwargs["enable_thinking"] = enable_thinking

        def render(messages: list[dict[str, Any]], generation_prompt: bool = False) -> list[int]:
            from jinja2.exceptions import TemplateError

            if not messages:
                return []
            try:
                ids = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=generation_prompt,
                                                         tokenize=True, **kwargs)
            except TemplateError as exc:
                calls = max(len(m.get("tool_calls") or []) for m in messages)
                raise TemplateRefused(
                    f"the model's chat template refuses this trajectory ({exc})" + (
                        f"; its turns make up to {calls} tool calls, and some templates (Llama 3.1's) take one a turn: "
                        "collect with a model whose template takes several, or train on the agent's text protocol "
                        "(cuda-agent train rft --engine trl)" if calls > 1 else "")) from None
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return list(ids)

        return render


def turn_tokens(render, messages: list[dict[str, Any]]) -> list[tuple[list[int], list[int]]]:
    """For each message, the tokens it adds and their loss mask: each assistant message, and each
    run of other messages (a turn's tool results, the opening system and user messages), is what
    the template renders for it after the message before it (and the system message, which holds
    the tools), on the last message of the run; the others add nothing. The loss is 1 on an
    assistant's tokens after its generation prompt. ``render(messages, generation_prompt)`` is the
    template's token ids. Raises TemplateNotLocal where a turn's tokens are not a continuation."""
    turns: list[tuple[list[int], list[int]]] = [([], []) for _ in messages]
    start = 0
    while start < len(messages):
        end = start + 1
        if messages[start]["role"] != "assistant":
            while end < len(messages) and messages[end]["role"] != "assistant":
                end += 1
        head = messages[:1] if start > 1 and messages[0]["role"] == "system" else []
        before = head + messages[max(start - 1, len(head)):start] if start else []
        prefix, rendered = render(before), render(before + messages[start:end])
        if rendered[:len(prefix)] != prefix:
            roles = ", ".join(m["role"] for m in messages[start:end])
            raise TemplateNotLocal(
                f"the chat template renders the turn of messages {start}-{end - 1} ({roles}) differently once it "
                "follows another: it cannot be tokenized turn by turn. Use a prefix-preserving training template "
                "(TRL's trl.chat_template_utils.get_training_chat_template gives one for Qwen3)")
        ids, loss = rendered[len(prefix):], [0] * (len(rendered) - len(prefix))
        if messages[start]["role"] == "assistant":
            prompt = render(before, generation_prompt=True)
            if prompt[:len(prefix)] != prefix or rendered[:len(prompt)] != prompt:
                raise TemplateNotLocal(f"the chat template's generation prompt does not begin assistant message {start}")
            loss = [0] * (len(prompt) - len(prefix)) + [1] * (len(rendered) - len(prompt))
        turns[end - 1] = (ids, loss)
        start = end
    return turns
