"""The accessibility tree, find and act against real GTK, Qt and Chromium apps."""
