"""Workloads in the task format: reading them, drawing held-out ones, and a workload as a task."""

from __future__ import annotations

import random
import types

import pytest

from cuda_agent.errors import TaskFormatError
from cuda_agent.task import load_task, task_from_source
from cuda_agent.workloads import (Workload, declares_workloads, held_out, parse_plan, read_plan, tolerance_of,
                                  variant)


@pytest.fixture(scope="module")
def task(fixtures_dir):
    return load_task(fixtures_dir / "workload_tasks" / "scale_bias_relu.py")


def run_source(source: str) -> types.ModuleType:
    module = types.ModuleType("task_under_test")
    exec(compile(source, "task_under_test", "exec"), module.__dict__)
    return module


def test_a_tasks_workloads_are_read_from_its_own_get_workloads(task):
    assert declares_workloads(task)
    plan = read_plan(task)
    assert [w.name for w in plan.workloads] == ["square", "tall"]
    assert plan.workloads[1].axes == {"batch_size": 512, "features": 64}
    assert (plan.workloads[1].atol, plan.workloads[1].rtol) == (0.02, 0.02)
    assert plan.workloads[0].atol is None and not any(w.held_out for w in plan.workloads)
    assert plan.varying == ("batch_size",)
    assert plan.defaults == {"batch_size": 256, "features": 256}


def test_a_task_without_get_workloads_declares_none(fixtures_dir):
    assert not declares_workloads(load_task(fixtures_dir / "tasks" / "scale_bias_relu.py"))


def test_a_workload_is_the_task_with_its_axes_set(task):
    tall = read_plan(task).workloads[1]
    sub = variant(task, tall)
    assert sub.name == "scale_bias_relu[tall]" and sub.source.startswith(task.source)
    assert not declares_workloads(sub)  # judged as a task of its own, not expanded again
    assert tolerance_of(sub) == {"atol": 0.02, "rtol": 0.02} and tolerance_of(task) == {}
    module = run_source(sub.source)
    (x,) = module.get_inputs()
    assert tuple(x.shape) == (512, 64) and module.get_init_inputs() == [64, 2.0]
    assert tuple(module.Model(*module.get_init_inputs())(x).shape) == (512, 64)


def test_held_out_workloads_take_sizes_the_task_never_declared(task):
    plan = read_plan(task)
    declared = {w.axes["batch_size"] for w in plan.workloads}
    for seed in range(50):
        drawn = held_out(plan, random.Random(seed))
        assert len(drawn) == 2 and all(w.held_out for w in drawn)
        for w in drawn:
            size = w.axes["batch_size"]
            assert size not in declared and 128 <= size <= 512 and size % 2 == 1
            # The other axes are a declared workload's, with its tolerance.
            base = next(d for d in plan.workloads if d.axes["features"] == w.axes["features"])
            assert (w.atol, w.rtol) == (base.atol, base.rtol)
    assert held_out(plan, random.Random(1)) == held_out(plan, random.Random(1))
    assert held_out(parse_plan({"workloads": [{"axes": {"n": 4}}], "defaults": {"n": 4}}, "t"),
                    random.Random(0)) == []


def test_held_out_sizes_go_past_the_largest_only_when_the_range_is_all_declared():
    plan = parse_plan({"workloads": [{"axes": {"n": 1}}, {"axes": {"n": 2}}], "varying": ["n"],
                       "defaults": {"n": 1}}, "t")
    assert [w.axes["n"] for w in held_out(plan, random.Random(0))] == [3]  # one: no two alike


def test_held_out_workloads_are_never_two_alike():
    plan = parse_plan({"workloads": [{"axes": {"n": 4}}], "varying": ["n"], "defaults": {"n": 4}}, "t")
    for seed in range(20):
        drawn = [w.axes["n"] for w in held_out(plan, random.Random(seed))]
        assert len(drawn) == len(set(drawn)) and set(drawn) <= {2, 3}


def test_an_axis_the_task_does_not_define_is_refused():
    with pytest.raises(TaskFormatError, match="'batchsize' is not a module-level name of the task"):
        parse_plan({"workloads": [{"axes": {"batchsize": 4}}], "defaults": {}}, "t.py")


def test_a_workload_may_set_an_infinite_value(task):
    sub = variant(task, Workload("inf", {"batch_size": 4, "fill": float("-inf")}))
    assert run_source(sub.source).fill == float("-inf")


@pytest.mark.parametrize(("data", "message"), [
    ({"workloads": []}, "non-empty list"),
    ({"workloads": [{"name": "a"}]}, "with an \"axes\" dict"),
    ({"workloads": [{"axes": {"n": 1}, "tolerance": 1}]}, "unknown keys ['tolerance']"),
    ({"workloads": [{"axes": {"n": 1}, "atol": -1}]}, "non-negative number"),
    ({"workloads": [{"name": "a", "axes": {}}, {"name": "a", "axes": {}}]}, "two workloads are named 'a'"),
    ({"workloads": [{"axes": {"not a name": 1}}]}, "is not a module-level name"),
    ({"workloads": [{"axes": {"n": [1, 2]}}]}, "holds a number, a string or a bool"),
    ({"workloads": [{"axes": {"n": 2.5}}], "varying": ["n"], "defaults": {"n": 1}}, "must be a positive integer"),
    ({"workloads": [{"axes": {"n": 2}}], "varying": "n"}, "VARYING_AXES must be a tuple"),
])
def test_malformed_workloads_are_refused_with_what_to_write(data, message):
    with pytest.raises(TaskFormatError, match="get_workloads|VARYING_AXES") as raised:
        parse_plan(data, "t.py")
    assert message in str(raised.value) and "t.py" in str(raised.value)


def test_a_get_workloads_that_raises_names_the_task_and_the_error(task):
    broken = task_from_source(task.source.replace('return [{"name": "square"', 'return [1 / 0, {"name": "square"'),
                              "broken", "broken.py")
    with pytest.raises(TaskFormatError, match=r"broken\.py: importing it and calling get_workloads\(\) failed: "
                                              r"ZeroDivisionError"):
        read_plan(broken)


def test_a_workload_describes_itself_by_its_values():
    assert Workload("w", {"n": 3}, held_out=True).describe() == "held-out workload w (n=3)"


def test_workloads_must_hold_plain_values(task):
    with_dtype = task_from_source(task.source.replace('"axes": {"batch_size": 256, "features": 256}',
                                                      '"axes": {"batch_size": 256, "dtype": torch.float16}'),
                                  "dtyped", "dtyped.py")
    with pytest.raises(TaskFormatError, match=r"dtyped\.py: .*must hold plain values .* a dtype by its name"):
        read_plan(with_dtype)
