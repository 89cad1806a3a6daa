"""The judge's tools: compile, verify and profile the workspace's current solution.

Each loads the candidate files from the workspace (only model_new.py and kernels/ count), sends
them to the episode's judge pool, and turns the verdict into a short report for the model. The
verdict and the judged solution ride along in the result, so the loop can keep the best one.
The files are read outside the sandbox, so symbolic links among them are refused: through one,
bash could point the judge at files it may not read itself.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from ...errors import SolutionFormatError
from ...judge.verdict import Verdict, render_feedback
from ...solution import KERNEL_DIR, MODEL_FILE, load_solution
from .base import Tool, ToolContext, ToolOutput

MAX_COMPILER_OUTPUT = 4_000  # characters of compiler output shown after a compile error

_NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


def _headline(stage: str, verdict: Verdict) -> str:
    line = f"{stage}: {verdict.status}"
    if stage != "compile" and verdict.status == "ok":
        line += ", correct" if verdict.correct else ", not correct"
    if stage == "profile" and verdict.correct:
        line += f", reward {verdict.reward}"
    return line


def _compiler_output(verdict: Verdict) -> str:
    details = verdict.details.strip()
    if verdict.status != "compile_error" or not details:
        return ""
    if len(details) <= MAX_COMPILER_OUTPUT:
        return f"compiler output:\n{details}"
    return (f"compiler output (last {MAX_COMPILER_OUTPUT} of {len(details)} characters):\n"
            f"{details[-MAX_COMPILER_OUTPUT:]}")


def report(stage: str, verdict: Verdict) -> str:
    """What the model reads: the outcome, the judge's feedback and, after a failed build, the
    end of the compiler's output."""
    parts = [_headline(stage, verdict), verdict.feedback or render_feedback(verdict)]
    if compiler := _compiler_output(verdict):
        parts.append(compiler)
    return "\n".join(p for p in parts if p)


def solution_links(workspace: Path) -> list[str]:
    """The symbolic links among the files the judge takes: model_new.py, kernels/ and what it holds."""
    links = [name for name in (MODEL_FILE, KERNEL_DIR) if (workspace / name).is_symlink()]
    kernels = workspace / KERNEL_DIR
    if KERNEL_DIR in links or not kernels.is_dir():
        return links
    for directory, dirs, names in os.walk(kernels):  # os.walk does not descend into linked directories
        for name in sorted(dirs + names):
            path = Path(directory) / name
            if path.is_symlink():
                links.append(path.relative_to(workspace).as_posix())
    return sorted(links)


class _Linked(Exception):
    def __init__(self, links: list[str]) -> None:
        super().__init__(links)
        self.links = links


def _load(workspace: Path) -> Any:
    if links := solution_links(workspace):
        raise _Linked(links)
    return load_solution(workspace)


def _links_text(stage: str, links: list[str]) -> str:
    shown = ", ".join(links[:10]) + (f" and {len(links) - 10} more" if len(links) > 10 else "")
    verb = "is a symbolic link" if len(links) == 1 else "are symbolic links"
    return (f"{stage}: not judged: {shown} {verb}, and the judge takes only regular files. Replace each "
            "link with a regular file (kernels/ with a real directory) holding the content, e.g. "
            f"`cp --remove-destination \"$(readlink -f LINK)\" LINK`, then call {stage} again.")


class _JudgeTool(Tool):
    stage: str
    parameters = _NO_ARGUMENTS

    def failed(self, verdict: Verdict) -> bool:
        return verdict.status != "ok" or (self.stage != "compile" and not verdict.correct)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            solution = await asyncio.to_thread(_load, ctx.workspace)
        except SolutionFormatError as exc:
            return ToolOutput(f"{self.stage}: the workspace does not hold a solution yet: {exc}",
                              is_error=True, data={"stage": self.stage, "status": "format_error"})
        except _Linked as exc:
            return ToolOutput(_links_text(self.stage, exc.links), is_error=True,
                              data={"stage": self.stage, "status": "symlink", "links": exc.links[:50]})
        verdict = await ctx.judge.evaluate(ctx.task, solution, self.stage)
        return ToolOutput(report(self.stage, verdict), is_error=self.failed(verdict), verdict=verdict.to_dict(),
                          solution=solution, data={"stage": self.stage, "status": verdict.status})


class CompileTool(_JudgeTool):
    name = "compile"
    stage = "compile"
    description = (
        "Build the workspace's solution (model_new.py and the sources in kernels/) exactly as the "
        "judge does: its own copies of the binding files, its own compiler flags, and its static "
        "checks of the rules in SKILL.md. Reports compile errors with the compiler's output, or "
        "rule violations. Quicker than verify; use it after each change to the kernels."
    )


class VerifyTool(_JudgeTool):
    name = "verify"
    stage = "verify"
    description = (
        "Compile the solution, then check ModelNew against the reference Model on several fresh "
        "random inputs and weights (new every call, so a solution must really compute the result). "
        "Reports whether every check passed, or the first failing check with its error, or the "
        "crash or timeout. Use it once compile succeeds, before profiling."
    )


class ProfileTool(_JudgeTool):
    name = "profile"
    stage = "profile"
    description = (
        "Verify the solution, then time it against the PyTorch reference run eagerly and under "
        "torch.compile, and give the reward: 3 if more than 5% faster than both, 2 if more than 5% "
        "faster than eager only, 1 if correct but not faster, -1 if not correct. The best correct "
        "solution profiled or verified in the episode is the one that counts."
    )
