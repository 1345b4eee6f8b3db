"""The MCP servers (stdio and `/v1/mcp`) through the official client SDK."""
