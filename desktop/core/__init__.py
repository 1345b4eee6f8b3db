"""The ground floor: domain errors (free of HTTP), screen rectangles, text parsing, what this machine has
installed, and how a thread hands work to the event loop. Imports nothing else of desktop/."""
