"""recording/: the MP4 writer on its own."""
