"""acp_green: a gevent runtime for Agent Client Protocol agents over stdio.

Importing the package is cheap and imports neither gevent nor the stdlib modules that
`acp-green serve` must patch first (its default); the public names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

# Type checkers see every public name (this block); at run time each loads on first use (`__getattr__`).
# The `X as X` form marks them as re-exported for `mypy --strict` (no_implicit_reexport).
if TYPE_CHECKING:
    from .agent import (
        Agent as Agent,
        Turn as Turn,
        Mode as Mode,
        SelectOption as SelectOption,
        BooleanOption as BooleanOption,
        ConfigOption as ConfigOption,
        Command as Command,
        AuthMethod as AuthMethod,
        ExtensionCall as ExtensionCall,
        SessionView as SessionView,
        Permission as Permission,
        ToolCallHandle as ToolCallHandle,
        CompactionHandle as CompactionHandle,
        ToolCallDetails as ToolCallDetails,
        ToolCallFields as ToolCallFields,
        TurnEnded as TurnEnded,
        ALLOW_OR_REJECT as ALLOW_OR_REJECT,
    )
    from .update_checks import (
        ToolKind as ToolKind,
        ToolCallStatus as ToolCallStatus,
        PlanEntry as PlanEntry,
        PlanEntryPriority as PlanEntryPriority,
        PlanEntryStatus as PlanEntryStatus,
        PermissionOptionKind as PermissionOptionKind,
        NoticeSeverity as NoticeSeverity,
        CompactionStatus as CompactionStatus,
    )
    from .context import (
        ConnectionSnapshot as ConnectionSnapshot,
    )
    from .blocks import (
        Block as Block,
        TextBlock as TextBlock,
        ImageBlock as ImageBlock,
        AudioBlock as AudioBlock,
        ResourceLinkBlock as ResourceLinkBlock,
        ResourceBlock as ResourceBlock,
        OtherBlock as OtherBlock,
    )
    from .server import (
        ServeOptions as ServeOptions,
        Server as Server,
        serve as serve,
        serve_stdio as serve_stdio,
    )
    from .errors import (
        RpcError as RpcError,
        TurnCancelled as TurnCancelled,
        TurnInterrupted as TurnInterrupted,
        CapabilityMissing as CapabilityMissing,
        ClientError as ClientError,
        McpError as McpError,
        McpUnavailable as McpUnavailable,
        StateNotStorable as StateNotStorable,
        ForkRefused as ForkRefused,
    )
    from .conversation import (
        ConversationTurn as ConversationTurn,
        ConversationMessage as ConversationMessage,
        ConversationToolCall as ConversationToolCall,
        ConversationPlan as ConversationPlan,
        ConversationItem as ConversationItem,
    )
    from .terminals import (
        Terminal as Terminal,
        TerminalReleased as TerminalReleased,
        ExitStatus as ExitStatus,
    )
    from .elicitation import (
        Elicited as Elicited,
    )
    from .mcp.client import (
        McpTools as McpTools,
    )
    from .mcp.tools import (
        Tool as Tool,
        ToolCall as ToolCall,
        ToolServer as ToolServer,
    )

_EXPORTS = {
    "Agent": "acp_green.agent",
    "Turn": "acp_green.agent",
    "Mode": "acp_green.agent",
    "SelectOption": "acp_green.agent",
    "BooleanOption": "acp_green.agent",
    "ConfigOption": "acp_green.agent",
    "Command": "acp_green.agent",
    "AuthMethod": "acp_green.agent",
    "ExtensionCall": "acp_green.agent",
    "SessionView": "acp_green.agent",
    "Permission": "acp_green.agent",
    "ToolCallHandle": "acp_green.agent",
    "CompactionHandle": "acp_green.agent",
    "ToolCallDetails": "acp_green.agent",
    "ToolCallFields": "acp_green.agent",
    "TurnEnded": "acp_green.agent",
    "ALLOW_OR_REJECT": "acp_green.agent",
    "ToolKind": "acp_green.update_checks",
    "ToolCallStatus": "acp_green.update_checks",
    "PlanEntry": "acp_green.update_checks",
    "PlanEntryPriority": "acp_green.update_checks",
    "PlanEntryStatus": "acp_green.update_checks",
    "PermissionOptionKind": "acp_green.update_checks",
    "NoticeSeverity": "acp_green.update_checks",
    "CompactionStatus": "acp_green.update_checks",
    "ConnectionSnapshot": "acp_green.context",
    "Block": "acp_green.blocks",
    "TextBlock": "acp_green.blocks",
    "ImageBlock": "acp_green.blocks",
    "AudioBlock": "acp_green.blocks",
    "ResourceLinkBlock": "acp_green.blocks",
    "ResourceBlock": "acp_green.blocks",
    "OtherBlock": "acp_green.blocks",
    "ServeOptions": "acp_green.server",
    "Server": "acp_green.server",
    "serve": "acp_green.server",
    "serve_stdio": "acp_green.server",
    "RpcError": "acp_green.errors",
    "TurnCancelled": "acp_green.errors",
    "TurnInterrupted": "acp_green.errors",
    "CapabilityMissing": "acp_green.errors",
    "ClientError": "acp_green.errors",
    "McpError": "acp_green.errors",
    "McpUnavailable": "acp_green.errors",
    "StateNotStorable": "acp_green.errors",
    "ForkRefused": "acp_green.errors",
    "ConversationTurn": "acp_green.conversation",
    "ConversationMessage": "acp_green.conversation",
    "ConversationToolCall": "acp_green.conversation",
    "ConversationPlan": "acp_green.conversation",
    "ConversationItem": "acp_green.conversation",
    "Terminal": "acp_green.terminals",
    "TerminalReleased": "acp_green.terminals",
    "ExitStatus": "acp_green.terminals",
    "Elicited": "acp_green.elicitation",
    "McpTools": "acp_green.mcp.client",
    "Tool": "acp_green.mcp.tools",
    "ToolCall": "acp_green.mcp.tools",
    "ToolServer": "acp_green.mcp.tools",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name is an error there, not Any

    def __getattr__(name: str) -> Any:
        module_name = _EXPORTS.get(name)
        if module_name is None:
            raise AttributeError(f"module 'acp_green' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value
        return value
