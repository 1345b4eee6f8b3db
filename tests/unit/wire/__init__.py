"""sandbox_desktop_wire: enums, limits and problem codes in one place."""
