"""proctor.mcp layer."""
