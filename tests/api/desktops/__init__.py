"""Many desktops in one server (`/v1/desktops`)."""
