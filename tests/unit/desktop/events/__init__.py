"""desktop/events/: the typed action log and desktop events, and the JSON they become."""
