"""Accessibility: the AT-SPI tree of a desktop's apps, element queries and actions (docs/accessibility.md)."""
