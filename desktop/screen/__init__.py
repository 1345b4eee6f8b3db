"""Pixels of the screen: screenshots (grab, crop, cursor, marks, scale, encode), the shared capture loop that
feeds recording, streaming and screen waits (frames.py), settling, and encoding. Imports desktop/core and x11."""
