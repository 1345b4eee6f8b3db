"""desktop/vendors/: vendor translation, pure."""
