"""What an action changed (docs/effects.md): the observer that watches the desktop's events for the short
window of one action (`observer.py`) and the effect it reports, with its one-line summary (`effect.py`)."""
