"""The heavy frameworks are optional extras, imported only when a stage needs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import CudaAgentError

EXTRAS = {"trl": "trl", "datasets": "trl", "verl": "verl", "hydra": "verl", "ray": "verl", "yaml": "verl"}


class TrainError(CudaAgentError):
    """Training cannot start or go on; the message says what to do."""


def require(module: str) -> ModuleType:
    """Import ``module`` or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(module.split(".")[0], "trl")
        raise TrainError(f"this needs {module.split('.')[0]}, which is not installed ({exc}): "
                         f"pip install 'cuda-agent[{extra}]'") from None
