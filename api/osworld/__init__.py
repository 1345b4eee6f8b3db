"""OSWorld's guest API for one desktop (docs/osworld.md): its routes (routes.py) done by the desktop's own
services (running.py: its commands and files in its sandbox; a11y.py: its tree as upstream's XML), served on a
port of its own (server.py). Below `server`, which wires it into each desktop (api/server/desktop_services.py)."""
