"""What one server holds: its configuration, its desktops (registry.py) and each one's services, scoped tokens,
Prometheus figures, logging, and the accessors routes reach them by (services.py). Imports api/http and middleware."""
