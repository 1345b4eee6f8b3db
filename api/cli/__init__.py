"""The `sandbox-desktop` command: the server, the installer, the readiness probe and the client commands.
The top room of api/: it may import every other."""
