"""A desktop's lifecycle: start, status, readiness, faults, shutdown, resizing."""
