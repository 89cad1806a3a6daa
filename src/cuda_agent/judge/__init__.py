"""The trusted evaluator: build, verify, time and reward a candidate solution.

Names are imported on first use, so that reading the configuration does not load torch.
"""

from importlib import import_module

_EXPORTS = {
    "Judge": ".judge", "JudgeConfig": ".config", "TimingConfig": ".config", "Verdict": ".verdict",
    "Violation": ".verdict", "milestone_reward": ".reward", "continuous_reward": ".reward",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
