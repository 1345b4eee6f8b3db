"""Wire models (pydantic) for requests and responses."""
