"""Test rig helpers: schema validation of ACP traffic."""
