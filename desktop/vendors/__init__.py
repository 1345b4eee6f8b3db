"""Vendor computer-use vocabularies (Anthropic, OpenAI) translated to batch steps of `desktop.actions.batch`."""
