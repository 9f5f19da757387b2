"""The trace tools: record the wire between an editor and an agent, then check, show and replay it (docs/TRACES.md)."""
