"""The agent's tools: files, search, a sandboxed shell, the judge, and finishing the episode."""

from .base import Tool, ToolContext, ToolError, ToolLimits, ToolOutput
from .files import EditTool, MultiEditTool, ReadTool, WriteTool
from .finish import FinishTool
from .judging import CompileTool, ProfileTool, VerifyTool
from .search import GlobTool, GrepTool
from .shell import BashTool
from .toolbox import ToolBox, default_tools, protected_files

__all__ = [
    "BashTool", "CompileTool", "EditTool", "FinishTool", "GlobTool", "GrepTool", "MultiEditTool",
    "ProfileTool", "ReadTool", "Tool", "ToolBox", "ToolContext", "ToolError", "ToolLimits",
    "ToolOutput", "VerifyTool", "WriteTool", "default_tools", "protected_files",
]
