"""The HTTP API (Starlette): routing, auth, CORS, wire models, problem+json, OpenAPI, and the CLI."""
