"""desktop/files/: the file API's domain layer on real temporary files."""
