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


LOGGERS = {"console": None, "tensorboard": "tensorboard", "wandb": "wandb"}  # name: the package it needs


def check_loggers(names: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The trainers' loggers (verl's ``trainer.logger``, TRL's ``report_to``): known names whose
    package is installed, or a TrainError that says what to install. None: the console alone."""
    import importlib.util

    chosen = tuple(dict.fromkeys(names or ("console",)))
    for name in chosen:
        if name not in LOGGERS:
            raise TrainError(f"unknown logger {name!r}; choose from {', '.join(LOGGERS)}")
        package = LOGGERS[name]
        if package and importlib.util.find_spec(package) is None:
            raise TrainError(f"the {name} logger needs the {package} package: pip install {package}")
    return chosen


def report_to(loggers: tuple[str, ...]) -> list[str]:
    """TRL's ``report_to`` for ``loggers`` (its console output is its own)."""
    return [name for name in loggers if name != "console"]
