"""Retrying model requests: which failures are worth another try, and how long to wait.

Clients send each request through ``send_translated``, which turns their SDK's exceptions into
``http_failure``'s verdict (from the status code and the server's message) or a ``TransientError``
for timeouts and lost connections; ``call_with_retries`` repeats a request on transient failures
with exponential backoff and jitter, honouring the server's ``Retry-After``, and reports how many
retries it took. When the retries run out it raises ``LLMError(transient=True)``: the outage may
pass. Everything else becomes an ``LLMError`` (or ``ContextOverflowError`` when the prompt does not
fit) at once, with ``transient=False``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from .base import ContextOverflowError, LLMError

T = TypeVar("T")

# Statuses worth repeating: request timeout, conflict (lock timeouts), rate limit, server errors.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# How servers phrase "the prompt does not fit": OpenAI, vLLM, SGLang, Anthropic, TGI.
CONTEXT_OVERFLOW_PATTERNS = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|prompt is too long|exceed context limit|too many tokens|input is too long"
    r"|longer than the model|max_model_len",
    re.IGNORECASE,
)
# A 429 that no amount of waiting fixes.
QUOTA_PATTERNS = re.compile(r"insufficient_quota|exceeded your current quota|credit balance", re.IGNORECASE)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to repeat a failed request."""

    max_retries: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def backoff_s(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** retry))
        return ceiling * random.uniform(0.5, 1.0)  # jitter spreads out clients that failed together


class TransientError(Exception):
    """A failure that may go away by itself: rate limit, server error, timeout, lost connection."""

    def __init__(self, message: str, retry_after_s: float | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s
        self.unreachable = unreachable  # refused or unresolvable: nothing answers at that address


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``Retry-After`` in seconds or a date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_message(body: Any, fallback: str = "") -> str:
    """The human-readable message inside a provider's error JSON, whatever its nesting."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            return error_message(inner, fallback)
        if isinstance(inner, str) and inner:
            return inner
        for key in ("message", "detail"):
            if isinstance(body.get(key), str) and body[key]:
                return body[key]
    if isinstance(body, str) and body:
        return body
    return fallback


STATUS_HINTS = {
    400: "the server rejected the request; check the model's options (max_tokens, temperature, tools)",
    401: "check the API key",
    403: "the API key is not allowed to use this model; check its permissions",
    404: "check the model name and the base URL",
    413: "the request is too large; shorten the conversation",
    422: "the server could not process the request; check the model's options",
}


def http_failure(provider: str, status: int, message: str, headers: Mapping[str, str] | None = None,
                 *, code: str | None = None, key_hint: str = "") -> Exception:
    """The exception for an HTTP error answer: TransientError, ContextOverflowError or LLMError."""
    text = message or "no message"
    if status in RETRYABLE_STATUSES or status >= 500:
        if status == 429 and QUOTA_PATTERNS.search(f"{code or ''} {text}"):
            return LLMError(f"{capitalised(provider)} refused the request (HTTP 429): {text}. "
                            "The account is out of quota or credit; add some before retrying.")
        return TransientError(f"HTTP {status}: {text}", parse_retry_after(headers))
    if status in (400, 413) and (code == "context_length_exceeded" or status == 413
                                 or CONTEXT_OVERFLOW_PATTERNS.search(text)):
        return ContextOverflowError(f"{capitalised(provider)}: the prompt does not fit in the model's context window "
                                    f"(HTTP {status}: {text}). Shorten or compact the conversation.")
    hint = STATUS_HINTS.get(status, "the request was refused and retrying will not help")
    if status == 401 and key_hint:
        hint = f"{hint} ({key_hint})"
    return LLMError(f"{capitalised(provider)} refused the request (HTTP {status}): {text}. {capitalised(hint)}.")


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


async def call_with_retries(request: Callable[[], Awaitable[T]], policy: RetryPolicy, *,
                            provider: str = "the model server", retry_unreachable: bool = True) -> tuple[T, int]:
    """Run ``request`` until it succeeds; returns its result and how many retries it took.

    Only ``TransientError`` is retried; any other exception propagates unchanged. Without
    ``retry_unreachable`` (a server that has never answered), a refused connection fails at once:
    waiting minutes for a server nobody started helps no one.
    """
    retries = 0
    while True:
        try:
            return await request(), retries
        except TransientError as exc:
            if exc.unreachable and not retry_unreachable:
                raise LLMError(f"{capitalised(provider)} could not be reached: {exc.message}. Start the "
                               "server, or check its address (--base-url).") from exc
            if retries >= policy.max_retries:
                raise LLMError(
                    f"{capitalised(provider)} failed on all {retries + 1} attempts; last error: "
                    f"{exc.message}. Check that the server is up and not overloaded, or allow more "
                    "retries (RetryPolicy.max_retries).", transient=True) from exc
            await asyncio.sleep(policy.backoff_s(retries, exc.retry_after_s))
            retries += 1


async def send_translated(send: Callable[[], Awaitable[T]], sdk: Any, *, provider: str, timeout_s: float,
                          key_variable: str) -> T:
    """Await ``send`` (one SDK call), translating the SDK's exceptions for ``call_with_retries``.

    ``sdk`` is the ``openai`` or ``anthropic`` module: both name their exceptions alike
    (``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``). ``key_variable`` is the
    environment variable the API key may come from, named in the hint for a 401.
    """
    try:
        return await send()
    except sdk.APIStatusError as exc:
        raise http_failure(provider, exc.status_code, error_message(exc.body, exc.message),
                           exc.response.headers, code=getattr(exc, "code", None),
                           key_hint=f"pass api_key or set {key_variable}") from exc
    except sdk.APITimeoutError as exc:  # before APIConnectionError, which it subclasses
        raise TransientError(f"no answer within {timeout_s:g} s; raise timeout_s if the model "
                             "needs longer") from exc
    except sdk.APIConnectionError as exc:
        raise TransientError(f"could not connect ({_root_cause(exc)})", unreachable=_unreachable(exc)) from exc


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what raised it, down to the first cause."""
    chain = [exc]
    while (exc := exc.__cause__ or exc.__context__) is not None:
        chain.append(exc)
    return chain


def _root_cause(exc: BaseException) -> BaseException:
    return _causes(exc)[-1]


def _unreachable(exc: BaseException) -> bool:
    """A connection refused, or a host name that does not resolve, anywhere in ``exc``'s causes."""
    import socket

    return any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in _causes(exc))


class SdkClient:
    """What the SDK clients share: a request body sent with counted, paced retries and read into
    a ``Completion``. Subclasses set ``retry``, ``provider`` and ``_client`` (the SDK's async
    client) and define ``request_body``, ``_send`` and ``_read``."""

    async def complete(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        request = self.request_body(messages, tools)
        started = time.perf_counter()
        response, retries = await call_with_retries(lambda: self._send(request), self.retry, provider=self.provider,
                                                    retry_unreachable=getattr(self, "_answered", False))
        self._answered = True  # from now on a refused connection is a restart, worth waiting for
        completion = self._read(response, request)
        completion.latency_s = time.perf_counter() - started
        completion.retries = retries
        return completion

    async def aclose(self) -> None:
        await self._client.close()
