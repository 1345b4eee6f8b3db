"""Top-level windows through EWMH: queries, focus/move/resize (control.py), states, and window screenshots
through XComposite (capture.py). Imports desktop/core, x11 and screen."""
