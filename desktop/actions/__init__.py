"""Batches of steps (batch.py: a closed union of frozen dataclasses run with `match`) and the waits they and
`POST /wait` use. Imports the rooms below it."""
