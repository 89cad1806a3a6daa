"""LLM clients behind one protocol: OpenAI-compatible servers, Anthropic's API, local transformers models.

``make_client`` builds one by provider name; the SDKs load only when their client is made.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .base import ContextOverflowError, LLMClient, LLMError
from .retry import RetryPolicy
from .text_protocol import TOOL_PROTOCOLS, check_tool_protocol

if TYPE_CHECKING:
    from .anthropic_client import AnthropicClient
    from .hf_client import HFClient
    from .openai_client import OpenAIClient

PROVIDERS = ("openai", "anthropic", "hf")

__all__ = ["AnthropicClient", "ContextOverflowError", "HFClient", "LLMClient", "LLMError", "OpenAIClient",
           "PROVIDERS", "RetryPolicy", "TOOL_PROTOCOLS", "make_client"]


def __getattr__(name: str) -> Any:
    # The client classes import their SDK lazily, so importing this package stays cheap.
    if name == "OpenAIClient":
        from .openai_client import OpenAIClient
        return OpenAIClient
    if name == "AnthropicClient":
        from .anthropic_client import AnthropicClient
        return AnthropicClient
    if name == "HFClient":
        from .hf_client import HFClient
        return HFClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_client(provider: str, model: str, *, base_url: str | None = None, api_key: str | None = None,
                tool_protocol: str = "native", **options: Any) -> LLMClient:
    """A client for ``model`` served by ``provider`` ("openai", "anthropic" or "hf").

    ``options`` go to the client's constructor (max_tokens, temperature, timeout_s, retry, ...).
    """
    if provider not in PROVIDERS:
        raise LLMError(f"Unknown LLM provider {provider!r}; choose one of {', '.join(PROVIDERS)} "
                       "(openai also covers vLLM, SGLang and other OpenAI-compatible servers).")
    check_tool_protocol(tool_protocol)
    if provider == "openai":
        from .openai_client import OpenAIClient
        check_options(OpenAIClient, provider, options)
        return OpenAIClient(model, base_url, api_key, tool_protocol=tool_protocol, **options)
    if provider == "anthropic":
        if tool_protocol != "native":
            raise LLMError("Anthropic models call tools natively; use tool_protocol='native' with provider anthropic.")
        from .anthropic_client import AnthropicClient
        check_options(AnthropicClient, provider, options)
        return AnthropicClient(model, api_key, base_url, **options)
    if base_url is not None or api_key is not None:
        raise LLMError("Provider hf runs a local transformers model: drop base_url and api_key, "
                       "or use provider openai to reach a model server.")
    from .hf_client import HFClient
    check_options(HFClient, provider, options)
    return HFClient(model, **options)


def check_options(cls: type, provider: str, options: dict[str, Any]) -> None:
    accepted = [name for name, parameter in inspect.signature(cls.__init__).parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise LLMError(f"Unknown option(s) {', '.join(unknown)} for provider {provider}; "
                       f"it accepts {', '.join(accepted)}.")
