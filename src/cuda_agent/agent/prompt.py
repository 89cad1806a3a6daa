"""The episode's opening messages: SKILL.md as the system prompt, the task as the first request.

The workspace's SKILL.md already states the goal, the layout, the rules the judge enforces and
the device's facts; the agent section added here says how the tools map onto that workflow.
"""

from __future__ import annotations

from ..task import Task
from ..llm.messages import Message

AGENT_GUIDE = """\
# Working in this environment

You work inside the workspace described above, through tools only. Paths are relative to the
workspace. There is no web access.

- `read`, `glob`, `grep` inspect files; `write` creates or replaces a file (read an existing file
  before replacing it); `edit` and `multi_edit` replace exact strings.
- `bash` runs one shell command in the workspace, in a fresh shell each time, sandboxed, with a
  time limit.
- `compile` builds your kernels with the judge's flags; `verify` checks ModelNew against the
  reference on fresh random inputs and weights; `profile` verifies and times it against eager
  PyTorch and torch.compile and reports the reward. These three are the judge: their verdicts are
  the only ones that count. Where SKILL.md says `cuda-agent compile`, `cuda-agent verify` or
  `cuda-agent profile`, call these tools; the judge cannot be run from bash.
- `finish` ends the episode. The best correct solution you profiled is kept, so finish once
  further work is unlikely to make it faster.

Work like a performance engineer: read model.py, write the kernels and model_new.py, compile,
verify, profile, then improve what the numbers point at.
"""


def system_prompt(skill_text: str) -> str:
    return skill_text.rstrip() + "\n\n" + AGENT_GUIDE


def task_prompt(task: Task, backend: str, closing: str = "Call `finish` when you are done.") -> str:
    """The first request; ``closing`` says how the work ends (the MCP server has no ``finish``)."""
    target = "CUDA kernels" if backend == "cuda" else "C++ kernels (the cpu backend)"
    return (f"Optimise the task `{task.name}` with {target}. Its reference, `model.py`, is:\n\n"
            f"```python\n{task.source.rstrip()}\n```\n\n"
            "Implement `ModelNew` in `model_new.py` with kernels under `kernels/`, make it correct, "
            f"then make it faster than torch.compile. {closing}".rstrip())


def opening_messages(task: Task, backend: str, skill_text: str) -> list[Message]:
    return [Message("system", system_prompt(skill_text)), Message("user", task_prompt(task, backend))]
