"""What the agent process owns beside the connection: its stderr, its logging, its counters, its heap."""
