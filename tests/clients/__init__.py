"""The products built on the API, used as their users use them: the Python client, the CLI, the MCP servers, the
pytest plugin and the reference TypeScript SDK."""
