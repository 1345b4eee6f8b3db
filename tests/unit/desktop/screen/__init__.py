"""desktop/screen/: the capture loop and the PNG writer."""
