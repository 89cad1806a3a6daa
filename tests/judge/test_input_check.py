"""Forward must leave its inputs as the reference's forward leaves them.

After every verify call the reference reports keyed checksums of its inputs before and after its
forward, the candidate reports its own after its forward, and the judge compares them: an input
the reference leaves alone must come back unchanged, an input the reference changes in place must
come back with the reference's values (within tolerance).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from cuda_agent.judge.run_support import check_aliases, check_inputs
from cuda_agent.judge.worker_main import input_digests, output_aliases
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

HONEST = Path(__file__).resolve().parents[1] / "honest" / "cpu_inplace_reference"


def test_digests_see_changed_and_moved_values():
    x = torch.randn(1000)
    same = input_digests([x, x.clone(), 3], key=7)
    assert same[0] == same[1] and same[2] is None
    moved = x.flip(0)
    assert input_digests([moved], key=7)[0] != same[0]  # the same values, elsewhere
    y = x.clone()
    y[500] += 1e-6
    assert input_digests([y], key=7)[0] != same[0]
    assert input_digests([x], key=8)[0] != same[0]  # keyed: a candidate cannot forge it
    assert input_digests([x.view(10, 100)], key=7)[0] != same[0]  # the shape counts too


def test_digests_of_odd_sizes_dtypes_and_layouts():
    for value in (torch.arange(7, dtype=torch.uint8), torch.ones(3, dtype=torch.bool), torch.randn(5, 3).t(),
                  torch.randn(3, dtype=torch.float64), torch.empty(0), torch.tensor(2.5)):
        a, b = input_digests([value, value.clone()], key=1)
        assert a == b and isinstance(a, int)


def test_aliases_are_outputs_in_an_inputs_memory():
    x, w = torch.randn(64, 64), torch.randn(64)
    assert output_aliases([x, w, 2.0], x.clone()) == []
    assert output_aliases([x, w, 2.0], x) == [[0, 0]]
    assert output_aliases([x, w], x[8:16].t()) == [[0, 0]]  # a view of a slice
    assert output_aliases([x, w], (torch.relu(x), w.view(8, 8))) == [[1, 1]]
    inside = torch.from_numpy(x.numpy().reshape(-1)[128:144])  # memory inside x, a storage of its own
    assert inside.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert output_aliases([x], inside) == [[0, 0]]
    assert output_aliases([torch.empty(0)], torch.empty(0)) == []


def test_the_judge_refuses_an_alias_the_reference_does_not_make():
    assert check_aliases({"aliases": []}, {"aliases": []}, 0) is None
    assert check_aliases({"aliases": [[0, 1]]}, {"aliases": [[0, 1]]}, 0) is None  # the reference returns a view too
    failed = check_aliases({"aliases": []}, {"aliases": [[0, 0]]}, 2)
    assert failed is not None and not failed.passed and failed.index == 2 and failed.phase == "aliases"
    assert "shares memory with input 0" in failed.message
    assert check_aliases({"aliases": [[0, 1]]}, {"aliases": [[0, 0]]}, 0) is not None


def _reply(before, after, values=None):
    return {"inputs_before": before, "inputs_after": after, "inputs": values or {}}


def test_the_judge_compares_inputs(judge_config):
    cfg = judge_config()
    assert check_inputs(_reply([1, None], [1, None]), {"inputs_after": [1, None], "inputs": {}}, 0, cfg) is None
    changed = check_inputs(_reply([1, None], [1, None]), {"inputs_after": [2, None], "inputs": {}}, 0, cfg)
    assert not changed.passed and changed.phase == "inputs" and "changed its input 0" in changed.message
    # The reference changes input 0: the candidate's values must match the reference's.
    ref = _reply([1], [2], {"0": torch.ones(4)})
    assert check_inputs(ref, {"inputs_after": [9], "inputs": {"0": torch.ones(4)}}, 0, cfg) is None
    wrong = check_inputs(ref, {"inputs_after": [9], "inputs": {"0": torch.zeros(4)}}, 0, cfg)
    assert not wrong.passed and "changes it in place" in wrong.message
    missing = check_inputs(ref, {"inputs_after": [9], "inputs": {}}, 0, cfg)
    assert not missing.passed and "did not report input 0" in missing.message


@pytest.mark.slow
def test_a_solution_that_leaves_a_changed_input_alone_is_incorrect(cpu_judge, tmp_path: Path):
    """The reference clamps its input in place; a solution that returns a clamped copy computes
    the right output but leaves the input other than the reference leaves it."""
    solution = tmp_path / "solution"
    shutil.copytree(HONEST / "solution", solution)
    binding = solution / "kernels" / "clamp_binding.cpp"
    binding.write_text(binding.read_text().replace(
        "    clamp_inplace_cpu(x.data_ptr<float>(), x.numel(), static_cast<float>(low), static_cast<float>(high));\n"
        "    return x;",
        "    auto y = x.clone();\n"
        "    clamp_inplace_cpu(y.data_ptr<float>(), y.numel(), static_cast<float>(low), static_cast<float>(high));\n"
        "    return y;"))
    verdict = cpu_judge.verify(load_task(HONEST / "model.py"), load_solution(solution))
    assert verdict.status == "incorrect", verdict.feedback
    failed = [c for c in verdict.checks if not c.passed]
    assert failed[0].phase == "inputs" and "input 0 after forward" in failed[0].message
    assert "leaves its inputs other than the reference does" in verdict.feedback
