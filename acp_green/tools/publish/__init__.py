"""Publishing an agent: write the ACP registry manifest (`agent.json`) of a package and check one (docs/PUBLISHING.md)."""
