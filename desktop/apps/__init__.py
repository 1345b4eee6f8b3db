"""Applications: launch (waiting for the window) and open files or URLs, registered as desktop processes.
Imports the rooms below it."""
