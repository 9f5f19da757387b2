"""The trace tools: recording a conversation between an editor and an agent, and reading traces."""
