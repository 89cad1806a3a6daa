"""What every LLM client offers the loop, and the errors it raises."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..errors import CudaAgentError
from .messages import Completion, Message


class LLMError(CudaAgentError):
    """The model could not be reached or refused the request, after every retry.

    ``transient`` is True when every attempt failed in a way that may pass by itself (rate limits,
    server errors, timeouts, lost connections), so the same request may succeed later; False when
    repeating it cannot help (a bad key, an unknown model, a rejected request, a prompt too long).
    """

    def __init__(self, *args: object, transient: bool = False) -> None:
        super().__init__(*args)
        self.transient = transient


class ContextOverflowError(LLMError):
    """The request is longer than the model's context window."""


@runtime_checkable
class LLMClient(Protocol):
    model: str

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        """One request. ``tools`` are OpenAI function schemas (``messages.tool_schema``).
        Retries rate limits and server errors with backoff; raises ContextOverflowError when the
        prompt does not fit, LLMError for anything else that does not recover."""
        ...

    async def aclose(self) -> None:
        ...
