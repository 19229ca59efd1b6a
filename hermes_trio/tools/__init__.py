"""The tool layer: protocol, registry, built-in tools and the approval policy."""

from hermes_trio.command_check.policy import find_danger, find_dangers
from hermes_trio.command_check.rules import DANGEROUS_PATTERNS, DangerPattern
from hermes_trio.tools.approval import ApprovalAnswer, check_approval, request_approval
from hermes_trio.tools.base import (
    ApprovalCallback,
    ApprovalDecision,
    ApprovalRequest,
    Tool,
    ToolCallScope,
    ToolContext,
    ToolResult,
)
from hermes_trio.tools.files import ReadFileTool, WriteFileTool
from hermes_trio.tools.registry import BUILTIN_TOOLS, ToolRegistry, default_registry
from hermes_trio.tools.terminal import TerminalTool

__all__ = [
    "BUILTIN_TOOLS",
    "DANGEROUS_PATTERNS",
    "ApprovalAnswer",
    "ApprovalCallback",
    "ApprovalDecision",
    "ApprovalRequest",
    "DangerPattern",
    "ReadFileTool",
    "TerminalTool",
    "Tool",
    "ToolCallScope",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "WriteFileTool",
    "check_approval",
    "default_registry",
    "find_danger",
    "find_dangers",
    "request_approval",
]
