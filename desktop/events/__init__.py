"""What happens on a desktop: the event bus, the X watcher and process exits that feed it (sources.py), and
the action log. Imports desktop/core, x11, processes, screen and windows."""
