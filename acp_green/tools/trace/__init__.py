"""The trace tools: record ACP traffic, then check, show, view and replay the trace (docs/TRACES.md)."""
