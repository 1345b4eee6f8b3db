"""The vendor computer-use endpoints (Anthropic, OpenAI) and replayed model transcripts."""
