"""The finish tool: the model says it is done, and the episode ends."""

from __future__ import annotations

from typing import Any

from .base import Tool, ToolContext, ToolOutput


class FinishTool(Tool):
    name = "finish"
    description = (
        "End the episode. Call it when the solution is correct and as fast as you can make it, or "
        "when you cannot make further progress. The best correct solution judged during the "
        "episode (by verify or profile) is the result, so profile the final version first. "
        "Optionally summarise what the kernels do and how fast they are."
    )
    parameters = {
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "What was done and the outcome, briefly."}},
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        summary = (args.get("summary") or "").strip()
        text = "Episode finished." + (" Summary recorded." if summary else "")
        return ToolOutput(text, finished=True, data={"summary": summary})
