"""A task judged over its workloads on the CUDA backend: each declared workload timed, its
roofline drawn, and the SOL scores and their reward in the verdict. Needs an NVIDIA GPU."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)",
                allow_module_level=True)

from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.judge.over_workloads import geometric_mean, mean  # noqa: E402
from cuda_agent.judge.reward import sol_reward  # noqa: E402
from cuda_agent.task import load_task  # noqa: E402


def test_a_general_cuda_kernel_is_paid_the_means_over_its_workloads(judge_config, fixtures_dir, fixture_solution):
    judge = Judge(judge_config(backend="cuda", call_timeout_s=10.0))
    task = load_task(fixtures_dir / "workload_tasks" / "scale_bias_relu.py")
    v = judge.judge(task, fixture_solution("cuda/correct"))  # one thread per element, bounds checked
    assert v.status == "ok", v.feedback
    held, declared = ([w for w in v.workloads if w["held_out"] is flag] for flag in (True, False))
    assert len(held) == 2 and all(w["stage"] == "verify" and w["candidate_ms"] is None for w in held)
    assert [w["name"] for w in declared] == ["square", "tall"] and all(w["stage"] == "profile" for w in declared)
    assert v.roofline.get("drawn"), v.roofline  # the first declared workload's
    if v.speedup_withheld is None:
        assert v.speedup_vs_eager == pytest.approx(geometric_mean([w["speedup_vs_eager"] for w in declared]))
        assert v.sol_score["eager"] == pytest.approx(mean([w["sol_score"]["eager"] for w in declared]))
        assert 0 < v.sol_score["eager"]
        assert v.reward_sol == sol_reward(True, v.sol_score["compile"])
    else:
        assert v.sol_score == {"eager": None, "compile": None} and v.reward_sol == 0.0
