"""Approvals: agent actions held for a person."""
