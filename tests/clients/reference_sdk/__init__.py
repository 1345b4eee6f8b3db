"""The reference's TypeScript SDK and React viewer against our server."""
