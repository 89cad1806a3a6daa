"""The trusted evaluator: build, verify, time and reward a candidate solution.

Where each part lives:

* ``judge``: ``Judge``: the compile stage, then one run per verify or profile, and the verdict's
  reward; ``group``: a group's candidates judged against one reference run.
* One run, a file per part: ``run_state`` (its directory, task, solution, verdict, secret seeds
  and processes), ``run_workers`` (starting its processes, each under the sandbox policy of its
  kind, ``sandbox.policy_for``, and every exchange with them), ``run_verify`` (how a check works:
  fresh secret weights and inputs, the candidate's output against the reference's, what its
  process recorded), ``run_timing`` (how a time is taken: sessions beside the reference's
  calibration calls, the credibility checks, the physical floor, the baselines).
* Inside a worker process: ``worker_main`` (``Worker``: its setup and its report of the sandbox;
  ``Checks``: a check's side there; ``Timing``: a timing session's); the processes and their
  confinement: ``worker_process``, ``fork_server``, ``sandbox``, ``landlock``, ``seccomp``,
  ``process_tree``.
* Timing: ``session`` (one timed session), ``timing`` (its statistics and what makes it
  credible), ``baselines`` (the eager and torch.compile cache), ``floor`` and ``roofline``.
* What a candidate may not do: ``static_checks`` (its sources), ``recording`` and ``evidence``
  (what its forward did), ``correctness`` (outputs and precision), ``audit`` (the task itself).

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
