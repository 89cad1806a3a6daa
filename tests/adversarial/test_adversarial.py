"""Adversarial solutions: each one cheats, and the judge must reject each with the right reason.

Every case under ``cases/`` is a real attempt to raise the reward without making the kernel
faster (the threat ids in its ``case.toml`` say which). The test judges it and asserts the
verdict's status, a reward of -1 and, where the case names one, the rule of the violation that
gave it away. A timing cheat that the judge's design makes pointless rather than refused (the
time it hid is counted) names its honest twin under ``tests/honest`` in ``paid_as``: it must be
paid no more than the twin. Cases with ``static_checks = false`` or ``runtime_checks = false`` in their
``config`` switch one layer of the judge off, to show that the layers behind it hold on their
own.

Cases on the ``cuda`` backend need a GPU and are skipped without one.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.judge.config import JudgeConfig
from cuda_agent.judge.judge import Judge
from cuda_agent.judge.rules import RULES
from cuda_agent.judge.verdict import STATUSES, Verdict
from cuda_agent.solution import load_solution
from cuda_agent.task import load_task

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

HERE = Path(__file__).resolve().parent
HONEST = HERE.parent / "honest"
CASES = HERE / "cases"
TASKS = HERE / "tasks"
DEFAULT_TASK = "scale_bias_relu"
BACKENDS = ("cpu", "cuda")
STAGES = ("verify", "profile")
KEYS = {"threats", "backend", "stage", "status", "rule", "config", "description", "task", "paid_as"}
THREAT_ID = re.compile(r"^[ABCD][1-9][0-9]?$")
GROUP_SIZES = {"A": 27, "B": 18, "C": 13, "D": 7}


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    threats: tuple[str, ...]
    backend: str
    stage: str
    status: str
    rule: str
    description: str
    task: str = DEFAULT_TASK
    config: dict[str, Any] = field(default_factory=dict)
    paid_as: str = ""  # the honest twin it must not out-earn, where the cheat is neutralised

    @property
    def solution_path(self) -> Path:
        """The workspace directory, or the single model_new.py of a load_inline-style solution."""
        solution = self.path / "solution"
        return solution if (solution / "kernels").is_dir() else solution / "model_new.py"

    @property
    def task_path(self) -> Path:
        return TASKS / f"{self.task}.py"


def _load_case(path: Path) -> Case:
    with open(path / "case.toml", "rb") as fh:
        data = tomllib.load(fh)
    unknown = set(data) - KEYS
    if unknown:
        raise ValueError(f"{path.name}/case.toml: unknown keys {sorted(unknown)}")
    return Case(name=path.name, path=path, threats=tuple(data["threats"]), backend=data["backend"],
                stage=data.get("stage", "verify"), status=data["status"], rule=data.get("rule", ""),
                description=" ".join(data["description"].split()), task=data.get("task", DEFAULT_TASK),
                config=dict(data.get("config", {})), paid_as=data.get("paid_as", ""))


def load_cases() -> list[Case]:
    return [_load_case(p) for p in sorted(CASES.iterdir()) if (p / "case.toml").is_file()]


ALL_CASES = load_cases()


def _param(case: Case):
    marks = [pytest.mark.timing] if case.stage == "profile" else []  # refused on what timing saw
    if case.backend == "cuda":
        marks += [pytest.mark.gpu,
                 pytest.mark.skipif(not torch.cuda.is_available(),
                                    reason="needs an NVIDIA GPU with CUDA (torch.cuda.is_available() is False)")]
    return pytest.param(case, id=case.name, marks=marks)


# -- the catalogue itself ------------------------------------------------------------------------
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in ALL_CASES])
def test_case_is_well_formed(case: Case):
    assert case.threats and all(THREAT_ID.match(t) for t in case.threats), case.threats
    for threat in case.threats:
        assert int(threat[1:]) <= GROUP_SIZES[threat[0]], f"no threat {threat}"
    assert case.backend in BACKENDS
    assert case.stage in STAGES
    assert case.status in STATUSES
    if case.paid_as:  # neutralised, not refused: paid at most as its honest twin
        assert case.status == "ok" and case.stage == "profile", "a twin is compared on what timing paid"
        assert (HONEST / case.paid_as / "model.py").is_file(), f"no honest case {case.paid_as}"
    else:
        assert case.status != "ok"
    assert case.status != "compile_error", "a cheat that does not compile proves nothing"
    assert case.rule == "" or case.rule in RULES, f"unknown rule {case.rule!r}"
    assert case.description
    assert case.task_path.is_file(), f"no task {case.task_path.name}"
    assert (case.path / "solution" / "model_new.py").is_file()
    kernels = case.path / "solution" / "kernels"
    if kernels.is_dir():
        sources = {p.suffix for p in kernels.iterdir()}
        assert ".cu" not in sources or case.backend == "cuda", "CUDA sources need the cuda backend"


def test_catalogue_covers_every_group_and_enough_cpu_cases():
    assert len(ALL_CASES) >= 44
    assert sum(c.backend == "cpu" for c in ALL_CASES) >= 30
    covered = {t for c in ALL_CASES for t in c.threats}
    for group in GROUP_SIZES:
        assert any(t.startswith(group) for t in covered), f"no case for group {group}"


def test_readme_lists_every_case():
    readme = (HERE / "README.md").read_text()
    missing = [c.name for c in ALL_CASES if f"`{c.name}`" not in readme]
    assert not missing, f"README.md does not list {missing}"


# -- judging -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def judges(judge_config):
    """One Judge per distinct configuration, shared by the cases that use it."""
    cache: dict[tuple, Judge] = {}
    fields = {f.name for f in dataclasses.fields(JudgeConfig)}

    def get(case: Case) -> Judge:
        overrides = dict(case.config)
        if case.backend == "cuda":
            overrides["backend"] = "cuda"
        missing = sorted(set(overrides) - fields)
        if missing:
            pytest.fail(f"{case.name} needs JudgeConfig settings that do not exist: {missing}")
        key = tuple(sorted(overrides.items()))
        if key not in cache:
            cache[key] = Judge(judge_config(**overrides))
        return cache[key]

    return get


def _summary(v: Verdict) -> str:
    rules = sorted({x.rule for x in v.violations})
    return f"status {v.status}, reward {v.reward}, rules {rules}\n{v.feedback}"


TIMED_CPU_CASES = [c for c in ALL_CASES if c.stage == "profile" and c.backend == "cpu"]


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in TIMED_CPU_CASES])
def test_a_case_caught_by_its_timing_builds(case: Case, judges):
    # Built beside the other tests: the test that judges it on its timing runs alone (marked
    # timing), where a build's compile would keep every core waiting; it then finds the build cached.
    verdict = judges(case).evaluate(load_task(case.task_path), load_solution(case.solution_path), stage="compile")
    assert verdict.status == "ok", _summary(verdict)
    if case.solution_path.is_dir():  # a single-file solution's load_inline is built when it is imported
        assert verdict.build["objects_total"] > 0, verdict.build


PREPARE_STEP_CASES = ("b16_forged_timing_reply_runtime",)  # the judge finds them on the next prepare step


@pytest.mark.slow
@pytest.mark.parametrize("case", [_param(c) for c in ALL_CASES])
def test_cheat_is_rejected(case: Case, judges, skip_where_the_flush_hides_20_ms):
    judge = judges(case)
    verdict = judge.evaluate(load_task(case.task_path), load_solution(case.solution_path), stage=case.stage)
    expected = f"{case.status}/{case.rule or '-'}"
    if case.name in PREPARE_STEP_CASES and verdict.status == "ok":
        skip_where_the_flush_hides_20_ms(verdict)  # the static rules, off for these cases, refuse them
    assert verdict.status == case.status, f"expected {expected}; got {_summary(verdict)}"
    if case.paid_as:
        _assert_paid_no_more_than_its_twin(case, verdict, judge)
        return
    assert verdict.correct is False and verdict.reward == -1, _summary(verdict)
    if case.rule:
        found = {x.rule for x in verdict.violations}
        assert case.rule in found, f"expected {expected}; got {_summary(verdict)}"


def _assert_paid_no_more_than_its_twin(case: Case, verdict: Verdict, judge: Judge) -> None:
    """The cheat's hidden time is counted: the same kernels ordered honestly earn as much."""
    twin = judge.evaluate(load_task(HONEST / case.paid_as / "model.py"),
                          load_solution(HONEST / case.paid_as / "solution"), stage=case.stage)
    assert twin.status == "ok" and twin.speedup_vs_eager, _summary(twin)
    assert verdict.speedup_vs_eager is not None, _summary(verdict)
    # The judge repeats a median to 1% on the GPU; 25% is far below what the hidden time was worth.
    assert verdict.speedup_vs_eager <= 1.25 * twin.speedup_vs_eager, (
        f"paid {verdict.speedup_vs_eager:.2f}x vs eager, its honest twin {twin.speedup_vs_eager:.2f}x\n"
        + _summary(verdict))
    assert verdict.reward <= twin.reward, f"reward {verdict.reward} vs its twin's {twin.reward}"
