"""The heavy frameworks are optional extras, imported only when a stage needs them."""

from __future__ import annotations

from types import ModuleType

from ..errors import CudaAgentError, import_extra

EXTRAS = {"trl": "trl", "datasets": "trl", "verl": "verl", "hydra": "verl", "ray": "verl", "yaml": "verl"}


class TrainError(CudaAgentError):
    """Training cannot start or go on; the message says what to do."""


def require(module: str) -> ModuleType:
    """Import ``module`` or say which extra installs it."""
    return import_extra(module, EXTRAS.get(module.split(".")[0], "trl"), "this", TrainError)
