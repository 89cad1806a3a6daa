"""SOL-ExecBench problem folders loaded as KernelBench-format tasks with workloads."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import pytest
import torch

from cuda_agent import pysource
from cuda_agent.errors import TaskFormatError
from cuda_agent.sol_execbench import float_init, load_problem
from cuda_agent.task import Task, load_task, load_tasks, validate_task_source

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sol_execbench"
PROBLEMS = ("gemm_k16", "grouped_heads_bf16", "rmsnorm_h64")
MALFORMED = FIXTURES / "malformed" / "paged_decode_safetensors"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def definition(folder: Path) -> dict:
    return json.loads((folder / "definition.json").read_text())


def workload_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "workload.jsonl").read_text().splitlines() if line.strip()]


def module_of(task: Task) -> types.ModuleType:
    module = types.ModuleType(f"sol_{task.name}")
    exec(compile(task.source, task.origin, "exec"), module.__dict__)
    return module


def reference_run(folder: Path):
    namespace: dict = {}
    exec(compile(definition(folder)["reference"], "reference", "exec"), namespace)
    return namespace["run"]


def resolved_axes(defn: dict, workload: dict) -> dict[str, int]:
    axes = {n: s["value"] for n, s in defn["axes"].items() if s["type"] == "const"}
    axes.update(workload["axes"])
    for name, spec in defn["axes"].items():
        if spec["type"] == "expr":
            axes[name] = int(eval(spec["expression"], {}, dict(axes)))
    return axes


def shape_of(spec: dict, axes: dict[str, int]) -> tuple[int, ...]:
    return tuple(int(a) if a.isdigit() else axes[a] for a in spec["shape"])


def copy_problem(tmp_path: Path, name: str = "rmsnorm_h64") -> Path:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    return folder


def edit_definition(folder: Path, change) -> None:
    data = definition(folder)
    change(data)
    (folder / "definition.json").write_text(json.dumps(data))


def write_workloads(folder: Path, rows: list[dict]) -> None:
    (folder / "workload.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


# -- loading ----------------------------------------------------------------------------------


def test_parent_folder_loads_each_problem_as_a_task():
    tasks = load_tasks(FIXTURES)  # malformed/ holds no definition.json of its own: not a problem
    assert [t.name for t in tasks] == list(PROBLEMS)
    for task in tasks:
        folder = FIXTURES / task.name
        assert isinstance(task, Task)
        assert task.origin == str(folder)
        defn = definition(folder)
        assert task.metadata["source_format"] == "sol-execbench"
        assert task.metadata["name"] == defn["name"]
        assert task.metadata["description"] == defn["description"]
        assert task.metadata["axes"] == defn["axes"]
        assert task.metadata["outputs"] == {n: {"shape": s["shape"], "dtype": s["dtype"]}
                                            for n, s in defn["outputs"].items()}


def test_a_problem_folder_loads_as_one_task():
    task = load_task(FIXTURES / "rmsnorm_h64")
    assert task.name == "rmsnorm_h64"
    assert load_tasks(str(FIXTURES / "rmsnorm_h64")) == [task]
    assert task == load_problem(FIXTURES / "rmsnorm_h64")
    with pytest.raises(TaskFormatError, match="holds 3 tasks"):
        load_task(FIXTURES)


def test_a_problem_folder_with_its_reference_py_is_still_the_problem(tmp_path):
    # SOL-ExecBench's dataset layout puts the reference beside the definition as reference.py.
    folder = copy_problem(tmp_path)
    (folder / "reference.py").write_text(definition(folder)["reference"])
    [task] = load_tasks(folder)
    assert task.metadata["source_format"] == "sol-execbench"


def test_py_files_in_a_folder_still_come_before_problem_subfolders(tmp_path):
    copy_problem(tmp_path)
    kernelbench_task = Path(__file__).parent / "fixtures" / "tasks" / "scale_bias_relu.py"
    (tmp_path / "1_add.py").write_text(kernelbench_task.read_text())
    assert [t.name for t in load_tasks(tmp_path)] == ["1_add"]


def test_a_folder_with_neither_says_what_it_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskFormatError, match="holds no .py task files, and no SOL-ExecBench problem folders"):
        load_tasks(tmp_path)


@pytest.mark.parametrize("name", PROBLEMS)
def test_generated_source_is_a_kernelbench_task_with_workloads(name):
    task = load_problem(FIXTURES / name)
    validate_task_source(task.source, task.origin)
    names = pysource.top_level_names(pysource.parse(task.source, task.origin))
    assert {"Model", "get_inputs", "get_init_inputs", "get_workloads", "VARYING_AXES", "run"} <= names
    assert module_of(task).get_init_inputs() == []


# -- workloads --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROBLEMS)
def test_workloads_are_the_workload_jsonl_lines(name):
    folder = FIXTURES / name
    task = load_problem(folder)
    lines = workload_lines(folder)
    workloads = module_of(task).get_workloads()
    assert [w["name"] for w in workloads] == [line["uuid"] for line in lines]
    for workload, line in zip(workloads, lines):
        scalars = {k: v["value"] for k, v in line["inputs"].items() if v["type"] == "scalar"}
        assert workload["axes"] == {**line["axes"], **scalars}
        if "tolerance" in line:
            assert workload["atol"] == line["tolerance"].get("max_atol", 1e-2)
            assert workload["rtol"] == line["tolerance"].get("max_rtol", 1e-2)
        else:
            assert "atol" not in workload and "rtol" not in workload
    assert task.metadata["tolerances"] == {line["uuid"]: line["tolerance"] for line in lines if "tolerance" in line}


def test_per_workload_tolerances_of_rmsnorm():
    workloads = module_of(load_problem(FIXTURES / "rmsnorm_h64")).get_workloads()
    assert workloads == [
        {"name": "rms-b7", "axes": {"batch_size": 7, "eps": 1e-6}},
        {"name": "rms-b1", "axes": {"batch_size": 1, "eps": 1e-5}, "atol": 1e-5, "rtol": 1e-4},
        {"name": "rms-b16", "axes": {"batch_size": 16, "eps": 1e-6}, "atol": 2e-3, "rtol": 1e-2},
    ]


@pytest.mark.parametrize("name", PROBLEMS)
def test_module_globals_hold_the_first_workload(name):
    folder = FIXTURES / name
    module = module_of(load_problem(folder))
    first = module.get_workloads()[0]
    for axis, value in first["axes"].items():
        assert getattr(module, axis) == value
    for axis, spec in definition(folder)["axes"].items():
        if spec["type"] == "const":
            assert getattr(module, axis) == spec["value"]
    module.Model()(*module.get_inputs())  # the default workload works on import


@pytest.mark.parametrize("name", PROBLEMS)
def test_each_workload_gives_the_definitions_shapes_and_the_references_outputs(name):
    folder = FIXTURES / name
    defn = definition(folder)
    module = module_of(load_problem(folder))
    run = reference_run(folder)
    for workload in module.get_workloads():
        module.__dict__.update(workload["axes"])
        axes = resolved_axes(defn, workload)
        torch.manual_seed(0)
        inputs = module.get_inputs()
        assert len(inputs) == len(defn["inputs"])
        for value, (input_name, spec) in zip(inputs, defn["inputs"].items()):
            if spec["shape"] is None:
                assert isinstance(value, float)
                if input_name in workload["axes"]:
                    assert value == workload["axes"][input_name]
            else:
                assert tuple(value.shape) == shape_of(spec, axes)
                assert value.dtype == DTYPES[spec["dtype"]]
        got = module.Model()(*inputs)
        expected = run(*inputs)
        if isinstance(expected, dict):
            expected = tuple(expected[n] for n in defn["outputs"])
        got = got if isinstance(got, tuple) else (got,)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(got) == len(defn["outputs"])
        for out, ref, spec in zip(got, expected, defn["outputs"].values()):
            assert tuple(out.shape) == shape_of(spec, axes)
            assert out.dtype == DTYPES[spec["dtype"]]
            assert torch.equal(out, ref)


def test_inputs_follow_axes_set_after_import():
    module = module_of(load_problem(FIXTURES / "grouped_heads_bf16"))
    module.batch_size, module.seq_len = 3, 7  # sizes no workload declares
    q, k, out_proj = module.get_inputs()
    assert q.shape == (21, 4, 8) and k.shape == (21, 2, 8) and out_proj.shape == (8, 8)
    out, lse = module.Model()(q, k, out_proj)
    assert out.shape == (21, 4, 8) and lse.shape == (21, 4)


def test_varying_axes_leave_out_constrained_ones():
    varying = {name: module_of(load_problem(FIXTURES / name)).VARYING_AXES for name in PROBLEMS}
    assert varying == {"gemm_k16": ("M", "N"), "grouped_heads_bf16": ("batch_size", "seq_len"),
                       "rmsnorm_h64": ("batch_size",)}
    fixed = load_problem(FIXTURES / "grouped_heads_bf16").metadata["fixed_var_axes"]
    assert fixed == {"num_qo_heads": "a constraint names it", "num_kv_heads": "a constraint names it"}


def test_var_axes_an_expression_divides_by_stay_fixed(tmp_path):
    folder = copy_problem(tmp_path, "grouped_heads_bf16")
    edit_definition(folder, lambda d: d["axes"]["tokens"].update(expression="batch_size * seq_len // 1"))
    task = load_problem(folder)
    assert module_of(task).VARYING_AXES == ()
    assert "adding and multiplying" in task.metadata["fixed_var_axes"]["seq_len"]


# -- inputs -----------------------------------------------------------------------------------


def test_random_scalars_and_workload_scalars():
    gemm = module_of(load_problem(FIXTURES / "gemm_k16"))
    assert isinstance(gemm.get_inputs()[2], float)  # "alpha": shape null, random
    rms = module_of(load_problem(FIXTURES / "rmsnorm_h64"))
    rms.__dict__.update(rms.get_workloads()[1]["axes"])
    assert rms.get_inputs()[2] == 1e-5


@pytest.mark.parametrize("name, rank, description, op_type, kind", [
    ("weight", 1, None, None, ("normal",)),
    ("norm_weight", 1, None, None, ("ones",)),
    ("post_attention_layernorm_weight", 1, None, None, ("ones",)),
    ("q_norm2_bias", 1, None, None, ("zeros",)),
    ("gate_proj", 2, None, None, ("fan_in",)),
    ("up_proj_weight", 2, None, None, ("fan_in",)),
    ("attention_mask", 4, None, None, ("causal_mask", "binary")),
    ("attention_mask", 1, None, None, ("binary_mask",)),
    ("pad_mask", 2, "Binary padding mask", None, ("binary_mask",)),
    ("cos_cached", 2, None, None, ("cos",)),
    ("rstd", 1, None, None, ("positive",)),
    ("x_var2", 1, None, None, ("positive",)),
    ("A_log", 1, None, None, ("uniform", "-5.0", "-1.0")),
    ("A_cumsum", 3, None, None, ("decay_cumsum",)),
    ("routing_weights", 2, None, None, ("softmax",)),
    ("probs", 2, None, "sampling", ("normal", "softmax_probs")),
    ("probs", 2, None, "gemm", ("normal",)),
])
def test_float_inputs_are_made_as_sol_execbench_makes_them(name, rank, description, op_type, kind):
    assert float_init(name, rank, description, op_type) == kind


def test_integer_bool_mask_and_positive_inputs(tmp_path):
    folder = tmp_path / "masked_norm"
    folder.mkdir()
    (folder / "definition.json").write_text(json.dumps({
        "name": "masked_norm",
        "axes": {"S": {"type": "var"}, "D": {"type": "const", "value": 4}},
        "inputs": {
            "attention_mask": {"shape": ["S", "S"], "dtype": "float32"},
            "ids": {"shape": ["S"], "dtype": "int32"},
            "keep": {"shape": ["S"], "dtype": "bool"},
            "rstd": {"shape": ["S"], "dtype": "float32"},
            "zero_d": {"shape": [], "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["S", "S"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(attention_mask, ids, keep, rstd, zero_d):\n"
                     "    return attention_mask * rstd + ids * keep + zero_d\n",
    }))
    write_workloads(folder, [{"uuid": "s5", "axes": {"S": 5}, "inputs": {}}])
    module = module_of(load_problem(folder))
    mask, ids, keep, rstd, zero_d = module.get_inputs()
    low = torch.finfo(torch.float32).min
    assert torch.equal(mask, torch.zeros(5, 5).masked_fill(torch.ones(5, 5).triu(1).bool(), low))
    assert ids.dtype == torch.int32 and ids.min() >= -1024 and ids.max() < 1024
    assert keep.dtype == torch.bool and keep.shape == (5,)
    assert (rstd >= 0.1).all()
    assert zero_d.shape == ()
    assert module.Model()(mask, ids, keep, rstd, zero_d).shape == (5, 5)


def test_custom_inputs_come_from_the_reference_entrypoint(tmp_path):
    folder = tmp_path / "custom_scale"
    folder.mkdir()
    (folder / "definition.json").write_text(json.dumps({
        "name": "custom_scale",
        "axes": {"N": {"type": "var"}, "H": {"type": "const", "value": 3}},
        "custom_inputs_entrypoint": "make_inputs",
        "inputs": {"x": {"shape": ["N", "H"], "dtype": "float32"}, "scale": {"shape": None, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N", "H"], "dtype": "float32"}},
        "reference": "import torch\n\n"
                     "def make_inputs(axes_and_scalars, device):\n"
                     "    n, h = axes_and_scalars['N'], axes_and_scalars['H']\n"
                     "    x = torch.arange(n * h, dtype=torch.float32, device=device).reshape(n, h)\n"
                     "    return {'x': x * axes_and_scalars['scale']}\n\n"
                     "def run(x, scale):\n    return x * scale\n",
    }))
    write_workloads(folder, [
        {"uuid": "n2", "axes": {"N": 2},
         "inputs": {"x": {"type": "custom"}, "scale": {"type": "scalar", "value": 2.0}}},
        {"uuid": "n4", "axes": {"N": 4},
         "inputs": {"x": {"type": "custom"}, "scale": {"type": "scalar", "value": 0.5}}},
    ])
    task = load_problem(folder)
    assert task.metadata["input_sources"] == {"x": "custom", "scale": "scalar"}
    module = module_of(task)
    assert module.VARYING_AXES == ("N",)
    module.__dict__.update(module.get_workloads()[1]["axes"])
    x, scale = module.get_inputs()
    assert scale == 0.5
    assert torch.equal(x, torch.arange(12, dtype=torch.float32).reshape(4, 3) * 0.5)
    assert torch.equal(module.Model()(x, scale), x * 0.5)


def test_a_future_import_of_the_reference_stays_first(tmp_path):
    folder = copy_problem(tmp_path)
    edit_definition(folder, lambda d: d.update(reference="from __future__ import annotations\n" + d["reference"]))
    task = load_problem(folder)
    module = module_of(task)  # a __future__ import anywhere but first would not compile
    assert module.Model()(*module.get_inputs()).shape == (7, 64)


# -- what the reader refuses ------------------------------------------------------------------


def test_safetensors_inputs_are_refused_with_what_to_do():
    with pytest.raises(TaskFormatError) as err:
        load_problem(MALFORMED)
    message = str(err.value)
    assert str(MALFORMED) in message
    assert "workload pd-b2 inputs.kv_indptr" in message
    assert "safetensors file 'blob/paged_decode/pd-b2.safetensors'" in message
    assert "Remove the workloads that read safetensors files" in message
    with pytest.raises(TaskFormatError, match="safetensors"):
        load_tasks(MALFORMED.parent)


def _set_input_dtype(dtype):
    return lambda d: d["inputs"]["weight"].update(dtype=dtype)


@pytest.mark.parametrize("change, rows, fragments", [
    (_set_input_dtype("float4_e2m1fn_x2"), None, ['"inputs".weight.dtype', "packed 4-bit"]),
    (_set_input_dtype("complex64"), None, ["'complex64' is not a SOL-ExecBench dtype"]),
    (lambda d: d.update(constraints=["batch_size == weight.shape[0]"]), None,
     ['"constraints"[0]', "cannot be evaluated", "Remove this one"]),
    (lambda d: d.update(constraints=["batch_size > 100"]), None,
     ["workload rms-b7", "breaks the constraint 'batch_size > 100'"]),
    (lambda d: d.update(reference=d["reference"].replace("def run(hidden_states, weight, eps)",
                                                         "def run(hidden_states, eps, weight)")), None,
     ["run() takes ['hidden_states', 'eps', 'weight']", "parameters must be the inputs, in order"]),
    (lambda d: d.update(reference="batch_size = 3\n" + d["reference"]), None,
     ["axis 'batch_size'", "module-level name of the reference", "Rename one of them"]),
    (lambda d: d.update(reference=d["reference"].replace("def run", "def forward")), None,
     ["defines no top-level run() function"]),
    (lambda d: d["axes"]["hidden_size"].update(type="expr", expression="batch_size.bit_length()"), None,
     ['"axes".hidden_size.expression', "is not arithmetic over axes"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {"eps": {"type": "custom"}}}],
     ["inputs.eps", "names no custom_inputs_entrypoint", "Set custom_inputs_entrypoint"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {"eps": {"type": "scalar", "value": 1e-6}}},
            {"uuid": "b", "axes": {"batch_size": 3}, "inputs": {}}],
     ["inputs.eps", "made in different ways (scalar in workload a, random in workload b)"]),
    (None, [{"uuid": "a", "axes": {}, "inputs": {}}], ["workload a axes", "no value to the var axes batch_size"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2, "rows": 4}, "inputs": {}}], ["axes.rows", "not a var axis"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {"bias": {"type": "random"}}}],
     ["names bias, which the definition's inputs do not"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {"weight": {"type": "scalar", "value": 1.0}}}],
     ["inputs.weight", "is a scalar, but the definition gives it a shape"]),
    (None, [{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {}}] * 2, ["uuid 'a' is used twice"]),
    (None, [], ["holds no workloads"]),
])
def test_what_cannot_be_read_faithfully_is_refused(tmp_path, change, rows, fragments):
    folder = copy_problem(tmp_path)
    if change is not None:
        edit_definition(folder, change)
    if rows is not None:
        write_workloads(folder, rows)
    with pytest.raises(TaskFormatError) as err:
        load_problem(folder)
    message = str(err.value)
    assert message.startswith(f"SOL-ExecBench problem {folder}: ")
    for fragment in fragments:
        assert fragment in message


def test_a_problem_without_workloads_file_is_refused(tmp_path):
    folder = copy_problem(tmp_path)
    (folder / "workload.jsonl").unlink()
    with pytest.raises(TaskFormatError, match="workload.jsonl: is missing"):
        load_problem(folder)
