"""HTTP plumbing: the operation table (operations.py) that drives routing, parsing and the OpenAPI document, the
router, problem+json, file responses, and the `/v1/desktop` vs `/v1/desktops/{id}` path scheme. Imports nothing else
of api/."""
