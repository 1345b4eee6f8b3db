"""desktop/x11/: packed X requests against a real Xvfb."""
