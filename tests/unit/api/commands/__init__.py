"""api/http/: the indexed router."""
