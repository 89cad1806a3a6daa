"""A client for a local ``transformers`` causal language model, calling tools by the text protocol.

Each request (chat template, tokenization, generation, decoding) runs in one worker thread, so the
event loop stays free for the judge and the tools. Requests take turns on an ``asyncio.Lock``
before they take a thread, so episodes waiting for the model hold no thread of the default
executor. Token usage is counted with the model's own tokenizer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .messages import Completion, Message, Usage
from .base import ContextOverflowError, LLMError
from .text_protocol import parse_tool_calls, to_text_messages

INSTALL_HINT = "pip install 'cuda-agent[hf]'"
# The plain template for tokenizers that ship without a chat template.
FALLBACK_TEMPLATE = "<|{role}|>\n{content}\n"
FALLBACK_PROMPT = "<|assistant|>\n"
UNBOUNDED = 10**8  # tokenizers report a huge model_max_length when they do not know it


class HFClient:
    """A local causal LM; always the text protocol, since chat templates disagree on tool calls."""

    def __init__(self, model_name_or_path: str, *, device: str | None = None, max_new_tokens: int = 4096,
                 temperature: float = 0.0, dtype: str = "auto") -> None:
        transformers, torch = import_transformers()
        self.model = model_name_or_path
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # Made on first use, inside the running event loop; see ``turn``.
        self._turn: asyncio.Lock | None = None
        self._turn_loop: asyncio.AbstractEventLoop | None = None
        # Only contended by callers on different event loops; within one loop ``turn`` serialises.
        self._model_lock = threading.Lock()
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_name_or_path)
            self._model = transformers.AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=dtype)
        except (OSError, ValueError) as exc:
            raise LLMError(f"Could not load the model {model_name_or_path!r}: {exc}. Give a local "
                           "directory or a Hugging Face model id of a causal language model.") from exc
        self._model.to(self.device).eval()
        self.max_positions = context_size(self._model.config, self.tokenizer)

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        started = time.perf_counter()
        async with self.turn():
            completion = await asyncio.to_thread(self.complete_blocking, list(messages), list(tools))
        completion.latency_s = time.perf_counter() - started
        return completion

    def turn(self) -> asyncio.Lock:
        """The lock requests take turns on, made in (and for) the running event loop."""
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn_loop is not loop:
            self._turn, self._turn_loop = asyncio.Lock(), loop
        return self._turn

    def complete_blocking(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        """One request from start to end, in the calling thread; ``complete`` runs it in a worker."""
        prompt_ids = self.encode(to_text_messages(messages, tools))
        budget = self.output_budget(len(prompt_ids))
        new_ids = self.generate(prompt_ids, budget)
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        content, calls = parse_tool_calls(text)
        hit_limit = len(new_ids) >= budget and not self.ends_with_eos(new_ids)
        reason = "length" if hit_limit else ("tool_calls" if calls else "stop")
        return Completion(message=Message("assistant", content, tool_calls=calls),
                          usage=Usage(len(prompt_ids), len(new_ids)), finish_reason=reason, model=self.model)

    async def aclose(self) -> None:
        self._model = None

    def render(self, messages: list[Message]) -> str:
        """The prompt text, by the tokenizer's chat template or the plain fallback."""
        chat = [{"role": m.role, "content": m.content} for m in messages]
        if not getattr(self.tokenizer, "chat_template", None):
            return "".join(FALLBACK_TEMPLATE.format(**turn) for turn in chat) + FALLBACK_PROMPT
        try:
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja raises its own errors, e.g. templates without a system role
            if chat and chat[0]["role"] == "system":
                return self.tokenizer.apply_chat_template(fold_system(chat), tokenize=False,
                                                          add_generation_prompt=True)
            raise LLMError(f"The chat template of {self.model!r} rejected the conversation: {exc}. "
                           "Use a model whose template accepts system/user/assistant turns.") from exc

    def encode(self, messages: list[Message]) -> list[int]:
        return list(self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"])

    def output_budget(self, prompt_tokens: int) -> int:
        """New tokens allowed: max_new_tokens, or less where the context window ends sooner."""
        room = self.max_positions - prompt_tokens if self.max_positions else self.max_new_tokens
        if room <= 0:
            raise ContextOverflowError(
                f"The prompt has {prompt_tokens} tokens but {self.model!r} takes at most "
                f"{self.max_positions}. Shorten or compact the conversation.")
        return min(self.max_new_tokens, room)

    def ends_with_eos(self, ids: list[int]) -> bool:
        return bool(ids) and ids[-1] in self.eos_ids()

    def eos_ids(self) -> set[int]:
        configured = self._model.generation_config.eos_token_id if self._model is not None else None
        ids = set(configured if isinstance(configured, list) else [configured])
        ids.add(self.tokenizer.eos_token_id)
        return {i for i in ids if i is not None}

    def generate(self, prompt_ids: list[int], budget: int) -> list[int]:
        _, torch = import_transformers()
        if self._model is None:
            raise LLMError("This HFClient was closed; create a new one to generate again.")
        with self._model_lock, torch.inference_mode():
            inputs = torch.tensor([prompt_ids], device=self.device)
            options: dict[str, Any] = {"max_new_tokens": budget, "do_sample": self.temperature > 0}
            if self.temperature > 0:
                options["temperature"] = self.temperature
            pad = self.tokenizer.pad_token_id
            eos = sorted(self.eos_ids())
            output = self._model.generate(inputs, attention_mask=torch.ones_like(inputs),
                                          pad_token_id=pad if pad is not None else (eos[0] if eos else 0),
                                          **options)
        return trim_padding(output[0, len(prompt_ids):].tolist(), self.eos_ids())


def import_transformers() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise LLMError(f"Local models need the transformers package: {INSTALL_HINT}") from exc
    return transformers, torch


def context_size(config: Any, tokenizer: Any) -> int | None:
    """The model's context window in tokens, or None when neither config nor tokenizer says."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions", "seq_length"):
        value = getattr(text_config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < UNBOUNDED else None


def fold_system(chat: list[dict[str, str]]) -> list[dict[str, str]]:
    """Templates without a system role get the system text at the head of the first user turn."""
    system, rest = chat[0]["content"], chat[1:]
    if rest and rest[0]["role"] == "user":
        return [{"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}] + rest[1:]
    return [{"role": "user", "content": system}] + rest


def trim_padding(ids: list[int], eos: set[int]) -> list[int]:
    """New tokens up to and including the first end-of-sequence; what follows is padding."""
    for index, token in enumerate(ids):
        if token in eos:
            return ids[:index + 1]
    return ids
