"""The inspector page (/ui/) in a real headless Chromium, against a real server."""
