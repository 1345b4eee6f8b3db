"""desktop/core/: dependency detection."""
