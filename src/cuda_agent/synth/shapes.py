"""Shape tokens: how a seed's arguments follow the tensor it is applied to.

A seed records constructor or call arguments once, at crawl time; some of them must follow the
input (``in_channels`` is the input's channel count, ``normalized_shape`` its last dimension). Such
values are stored as tokens and resolved for each concrete input shape, by the crawler's probes
and by the composer alike.
"""

from __future__ import annotations

import random
from typing import Any

# token -> what it becomes for an input of shape ``shape``
SHAPE_TOKENS = {
    "$C": "the input's channel dimension (dim 1)",
    "$last": "the input's last dimension",
    "$last_list": "the input's last dimension, as a one-element list (normalized_shape)",
    "$width": "an output width the composer chooses (out_channels, out_features)",
    "$groups": "a group count that divides the channel dimension",
    "$heads": "a head count that divides the last dimension",
    "$channel_param": "a learned operand broadcast over dim 1: shape (C, 1, ...)",
    "$sample_param": "a learned operand shaped like one sample: shape input[1:]",
}

# A second operand that is a learned parameter: these tokens name its shape, not a value.
OPERAND_TOKENS = ("$channel_param", "$sample_param")


def _divisor(n: int, choices: tuple[int, ...]) -> int:
    return next((c for c in choices if n % c == 0), 1)


def operand_shape(token: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if token == "$channel_param":
        return (shape[1],) + (1,) * (len(shape) - 2) if len(shape) >= 2 else (shape[-1],)
    if token == "$sample_param":
        return tuple(shape[1:]) if len(shape) >= 2 else tuple(shape)
    raise ValueError(f"{token} is not an operand token")


def resolve(value: Any, shape: tuple[int, ...], width: int) -> Any:
    """The concrete value of one argument for an input of ``shape`` (non-tokens pass through)."""
    if not (isinstance(value, str) and value.startswith("$")):
        return value
    if value == "$C":
        return shape[1]
    if value == "$last":
        return shape[-1]
    if value == "$last_list":
        return [shape[-1]]
    if value == "$width":
        return width
    if value == "$groups":
        return _divisor(shape[1], (4, 8, 2, 16))
    if value == "$heads":
        return _divisor(shape[-1], (8, 4, 2))
    if value in OPERAND_TOKENS:
        return value  # the composer makes a parameter of operand_shape(value, shape)
    raise ValueError(f"unknown shape token {value!r}; known: {', '.join(SHAPE_TOKENS)}")


def resolve_all(args: dict[str, Any], shape: tuple[int, ...], width: int) -> dict[str, Any]:
    return {name: resolve(value, shape, width) for name, value in args.items()}


def pick_width(rng: random.Random, shape: tuple[int, ...], rank_kind: str) -> int:
    """A plausible output width: channel counts for images and sequences, features for matrices."""
    if rank_kind == "features":
        return rng.choice((256, 512, 1024, 2048, 4096))
    return rng.choice((16, 32, 64, 128, 256))
