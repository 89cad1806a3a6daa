"""Outputs of gigabytes judged on the GPU: compared where they were computed, through CUDA IPC
across the sandbox, never copied whole to the judge. Needs an NVIDIA GPU; skipped elsewhere."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)", allow_module_level=True)

from cuda_agent.judge.judge import Judge  # noqa: E402
from cuda_agent.task import task_from_source  # noqa: E402


def _scaled(task, rows: int):
    """The fixture task with ``rows`` rows of 256 features: 1 KB of output per row."""
    source = task.source.replace("batch_size = 256", f"batch_size = {rows}")
    assert source != task.source
    return task_from_source(source, f"scale_bias_relu_{rows}", "test")


@pytest.fixture(scope="module")
def judge(judge_config) -> Judge:
    return Judge(judge_config(backend="cuda", call_timeout_s=120.0))


def test_a_two_gigabyte_output_is_verified_on_the_gpu(judge, task, fixture_solution):
    big = _scaled(task, 1 << 21)  # 2 GB in, 2 GB out
    v = judge.verify(big, fixture_solution("cuda/correct"))
    assert v.status == "ok", v.feedback
    assert v.settings.get("outputs_compared_on") == "gpu", v.notes
    assert all(c.passed and c.elements == (1 << 29) for c in v.checks)
    assert not v.precision.get("reduced") and v.precision.get("candidate_error") is not None

    wrong = judge.verify(big, fixture_solution("cuda/wrong_values"))
    assert wrong.status == "incorrect" and "worst at output[" in wrong.error
    assert wrong.settings.get("outputs_compared_on") == "gpu"


def test_a_timed_large_output_is_rechecked_through_the_exchange_buffer(judge, task, fixture_solution):
    v = judge.judge(_scaled(task, 1 << 19), fixture_solution("cuda/correct"))  # 512 MB out
    assert v.status == "ok", v.feedback
    assert v.settings.get("outputs_compared_on") == "gpu", v.notes
    timed = [c for c in v.checks if c.phase == "timing"]
    assert timed and all(c.passed for c in timed)


def test_the_reference_weights_reach_each_candidate_on_the_gpu(judge, task, fixture_solution):
    # Each check's weights are copied on the device from an exchange buffer of the candidate's own,
    # not sent through the judge; a group's candidates each load from their own buffer.
    v = judge.verify(task, fixture_solution("cuda/correct"))
    assert v.status == "ok", v.feedback
    assert v.settings.get("weights_loaded_from") == "gpu", v.notes
    group = judge.evaluate_many(task, [fixture_solution("cuda/correct"), fixture_solution("cuda/wrong_values"),
                                       fixture_solution("cuda/correct")], "verify")
    assert [g.status for g in group] == ["ok", "incorrect", "ok"], [g.feedback for g in group]
    assert all(g.settings.get("weights_loaded_from") == "gpu" for g in group)


# Prepended to a correct solution's model_new.py: its process (the candidate's, the attacker's)
# refuses to map any of the reference's exchange buffers.
_REFUSE_MAPPING = '''
import cuda_agent.judge.device_exchange as _exchange


class _Refused(_exchange.MappedBuffer):
    def __init__(self, handle_hex):
        raise _exchange.ExchangeUnavailable("this process maps no buffers")


_exchange.MappedBuffer = _Refused
'''


def test_a_candidate_that_cannot_map_the_weights_buffer_gets_them_whole(judge_config, task, workspace_copy):
    from cuda_agent.solution import load_solution

    workspace = workspace_copy("cuda/correct")
    model_new = workspace / "model_new.py"
    model_new.write_text(_REFUSE_MAPPING + model_new.read_text())
    # the scan would refuse the import of the judge's package before anything ran
    judge = Judge(judge_config(backend="cuda", call_timeout_s=120.0, static_checks=False))
    v = judge.verify(task, load_solution(workspace))
    assert v.status == "ok", v.feedback
    assert v.settings.get("weights_loaded_from") == "host", v.settings
    assert all(c.passed for c in v.checks)
