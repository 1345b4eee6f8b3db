"""What happens on a desktop: its events, one typed class per type (event_types.py), the event bus
(bus.py), the X watcher and process exits that feed it (sources.py), and the action log, one typed class per
kind (action_log.py). Imports desktop/core, x11, processes, screen and windows."""
