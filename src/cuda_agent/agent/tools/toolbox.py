"""Dispatch: from the model's tool call to a tool's result, never raising for the model's mistakes.

Unknown tools, arguments that are not JSON or do not fit the tool's schema, and the tools' own
ToolErrors all come back as error results that say what to do instead. An unexpected exception
inside a tool becomes an error result too, marked as internal, so one fault does not end the
episode.
"""

from __future__ import annotations

import difflib
import json
import logging
import time
from typing import Any

import jsonschema

from ...workspace.layout import PROTECTED_FILES
from ...llm.messages import ToolCall
from ..text import cap_text
from .base import Tool, ToolContext, ToolError, ToolLimits, ToolOutput
from .files import EditTool, MultiEditTool, ReadTool, WriteTool
from .finish import FinishTool
from .judging import CompileTool, ProfileTool, VerifyTool
from .search import GlobTool, GrepTool
from .shell import BashTool

log = logging.getLogger(__name__)

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
               float: "number", type(None): "null"}


def protected_files() -> frozenset[str]:
    """The workspace files the agent may read but never change: the task and the judge's files."""
    return frozenset(PROTECTED_FILES)


def default_tools(limits: ToolLimits | None = None) -> list[Tool]:
    """All eleven tools; ``limits`` only shapes what their descriptions promise."""
    limits = limits or ToolLimits()
    return [BashTool(limits.bash_timeout_s, limits.max_output_chars), ReadTool(limits), WriteTool(),
            EditTool(), MultiEditTool(), GlobTool(limits.max_matches), GrepTool(limits.max_matches),
            CompileTool(), VerifyTool(), ProfileTool(), FinishTool()]


class ToolBox:
    """The tools of an episode, by name, with the schemas the model is given."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools, self._validators = index_tools(tools)

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolOutput:
        started = time.monotonic()
        output = await self._dispatch(call, ctx)
        output.text = cap_text(output.text, ctx.limits.max_output_chars)
        output.data.setdefault("duration_s", round(time.monotonic() - started, 3))
        return output

    async def _dispatch(self, call: ToolCall, ctx: ToolContext) -> ToolOutput:
        tool = self.tools.get(call.name)
        if tool is None:
            return _error(self._unknown(call.name))
        try:
            args = self._arguments(tool, call.arguments)
        except ToolError as exc:
            return _error(str(exc))
        try:
            output = await tool.run(args, ctx)
            if not isinstance(output, ToolOutput):
                raise TypeError(f"{tool.name} returned {type(output).__name__}, not a ToolOutput")
            return output
        except ToolError as exc:
            return _error(f"{tool.name} failed: {exc}")
        except Exception as exc:  # noqa: BLE001 - a tool's fault must not end the episode
            log.exception("tool %s raised", tool.name)
            return _error(f"{tool.name} failed with an internal error ({type(exc).__name__}: {exc}). "
                          "This is a fault of the tool, not of your call; try again, or reach the same "
                          "goal another way.", internal_error=True, exception=type(exc).__name__)

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"there is no tool named {name!r}.{hint} The available tools are: {', '.join(self.names)}."

    def _arguments(self, tool: Tool, raw: str) -> dict[str, Any]:
        """The call's arguments, parsed and checked against the tool's schema; ToolError if not."""
        if raw is None or not str(raw).strip():
            args: Any = {}
        else:
            try:
                args = json.loads(raw)
            except json.JSONDecodeError as exc:
                shown = raw if len(raw) <= 300 else raw[:300] + "..."
                raise ToolError(f"the arguments of {tool.name} are not valid JSON ({exc.msg} at line "
                                f"{exc.lineno}, column {exc.colno}): {shown!r}. Send one JSON object, "
                                f"e.g. {_example(tool)}") from None
        return check_arguments(tool, args, self._validators[tool.name])


def index_tools(tools: list[Any]) -> tuple[dict[str, Any], dict[str, jsonschema.protocols.Validator]]:
    """Tools by name, and a validator of each one's ``parameters``; ValueError on a repeated name
    or a schema that is not valid JSON Schema. ``tools`` need only ``name`` and ``parameters``."""
    by_name: dict[str, Any] = {}
    for tool in tools:
        if tool.name in by_name:
            raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        by_name[tool.name] = tool
    return by_name, {name: jsonschema.Draft202012Validator(tool.parameters) for name, tool in by_name.items()}


def check_arguments(tool: Any, args: Any, validator: jsonschema.protocols.Validator) -> dict[str, Any]:
    """Decoded arguments checked against ``tool.parameters``, or a ToolError that names the
    argument and says what the tool takes. ``tool`` needs only ``name`` and ``parameters``, so
    the MCP server checks its own tools' calls the same way."""
    if args is None:
        args = {}  # some models send null for a tool without arguments
    if not isinstance(args, dict):
        raise ToolError(f"the arguments of {tool.name} must be a JSON object, not {_json_type(args)}; "
                        f"send e.g. {_example(tool)}")
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    if errors:
        # A missing or unexpected argument can be reported by several errors: say it once.
        problems = "; ".join(dict.fromkeys(p for e in errors for p in _describe(e)))
        raise ToolError(f"invalid arguments for {tool.name}: {problems}. {tool.name} takes {_usage(tool)}.")
    return args


def _error(text: str, **data: Any) -> ToolOutput:
    return ToolOutput(text, is_error=True, data=dict(data))


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _usage(tool: Tool) -> str:
    """The tool's arguments in one line: ``path (string), offset (integer, optional)``."""
    properties = tool.parameters.get("properties", {})
    if not properties:
        return "no arguments (send {})"
    required = set(tool.parameters.get("required", []))
    parts = [f"{name} ({spec.get('type', 'any')}{'' if name in required else ', optional'})"
             for name, spec in properties.items()]
    return ", ".join(parts)


def _example(tool: Tool) -> str:
    required = tool.parameters.get("required", [])
    samples = {"string": "...", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    properties = tool.parameters.get("properties", {})
    return json.dumps({name: samples.get(properties[name].get("type"), "...") for name in required})


def _describe(error: jsonschema.ValidationError) -> list[str]:
    """A schema violation in words that name the argument(s)."""
    where = ".".join(str(p) for p in error.path)
    inside = f" (in {where})" if where else ""
    if error.validator == "required":
        return [f"missing required argument {name!r}{inside}"
                for name in error.validator_value if name not in error.instance]
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        return [f"unexpected argument {name!r}{inside}" for name in sorted(error.instance) if name not in allowed]
    if error.validator == "type":
        return [f"argument {where!r} must be of type {error.validator_value}, not {_json_type(error.instance)} "
                f"({json.dumps(error.instance)[:80]})"]
    return [f"argument {where!r}: {error.message}"]
