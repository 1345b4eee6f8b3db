"""The OSWorld guest API of a desktop (docs/osworld.md)."""
