"""Route tables: one module per API area, each exposing OPERATIONS."""
