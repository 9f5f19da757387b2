"""Everything `acp-green serve` can set, for the process and for each of its connections."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .rpc.transport import OutputLimits


@dataclass(slots=True)
class ServeOptions:
    """Everything `acp-green serve` can set."""

    max_background: int = 32
    shutdown_grace: float = 5.0
    #: Seconds a cancelled turn may run on before it is interrupted at its blocking call; inf: never (`--cancel-grace`).
    cancel_grace: float = 0.5
    idle_timeout: float = 1800.0
    max_line_bytes: int = 64 << 20
    max_mcp_servers: int = 64  # per session/new, load or resume, every transport counted
    output: OutputLimits = field(default_factory=OutputLimits)
    handle_signals: bool = True
    #: MCP servers provided over ACP as stdio commands: (name, argv) pairs (`--provide-mcp`).
    provide_mcp: tuple[tuple[str, tuple[str, ...]], ...] = ()
    state_dir: str | None = None  # None: $XDG_STATE_HOME/acp-green, else ~/.local/state/acp-green
    ephemeral: bool = False  # keep sessions and usage in memory only
    #: A PostgreSQL server to keep them on instead (`--store postgresql://...`), shared by any number of agents.
    store_url: str | None = None
    #: Serve ACP's stable schema only: its unstable methods answer -32601 and are not advertised (`--stable-only`).
    stable_only: bool = False
    #: The highest ACP version `initialize` negotiates: 2 (the v2 draft) or 1 (`--max-protocol-version`).
    max_protocol_version: int = 2
    #: Seconds the event loop may be held before a WARNING names what holds it; 0: never (blockwatch.py).
    block_warning: float = 0.5
    #: Write every line read and written to this trace file (`--trace`; the format: docs/TRACES.md).
    trace: str | None = None

    def __post_init__(self) -> None:
        """Refuse a value the runtime cannot honour, naming the field, before anything is served.
        A NaN would reach a gevent timer, and a hub running one stops serving every greenlet."""
        for name, lowest, infinite in (("shutdown_grace", 0.0, False), ("cancel_grace", 0.0, True),
                                       ("idle_timeout", 0.0, False), ("block_warning", 0.0, False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"ServeOptions.{name} must be a number of seconds, not {type(value).__name__}")
            if math.isnan(value) or value < lowest or (math.isinf(value) and not infinite):
                allowed = "a number of seconds >= 0, or math.inf (never)" if infinite else "a finite number of seconds >= 0"
                raise ValueError(f"ServeOptions.{name} must be {allowed}, not {value!r}")
        if self.idle_timeout == 0:
            raise ValueError("ServeOptions.idle_timeout must be more than 0 seconds")
        for name, lowest in (("max_background", 1), ("max_line_bytes", 1024), ("max_mcp_servers", 0),
                             ("max_protocol_version", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ValueError(f"ServeOptions.{name} must be an integer >= {lowest}, not {value!r}")
        if self.max_protocol_version > 2:
            raise ValueError(f"ServeOptions.max_protocol_version must be 1 or 2, not {self.max_protocol_version!r}")
