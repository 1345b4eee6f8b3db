"""The HTTP API (Starlette) and the programs built on it: the CLI and the MCP servers.

Rooms, lowest first; each imports only the rooms before it (tests/unit/test_architecture.py, docs/architecture.md):

    http        operations, router, OpenAPI, problems, file responses, desktop paths
    middleware  request metrics, Host/Origin guard, CORS, token (one file each)
    server      configuration, registry, desktop services, scoped tokens, metrics, logs, the accessors
    convert     wire to domain (so that no route module imports another)
    approvals   the approval gate
    routes      one module per API area, each an OPERATIONS table
    mcp         the MCP servers
    app.py      `create_app`: the one place the server is assembled
    cli         the `sandbox-desktop` command
"""
