"""desktop/lifecycle/: the installer."""
