"""Batches of actions (`POST /v1/desktop/actions`)."""
