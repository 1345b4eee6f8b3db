"""MP4 recording of the desktop through PyAV, and the catalog of recordings."""
