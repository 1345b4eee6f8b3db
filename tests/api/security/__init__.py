"""Tokens, secrets, the Host and Origin rules, and what a web page can do to a local server."""
