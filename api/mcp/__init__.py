"""The MCP servers: `sandbox-desktop mcp` over stdio and `/v1/mcp` over streamable HTTP, with their tools."""
