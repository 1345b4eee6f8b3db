"""The Python client (sandbox_desktop_client), sync and async, and its wheel."""
