"""The ground floor: domain errors (free of HTTP), screen rectangles, text parsing, and what this machine has
installed. Imports nothing else of desktop/."""
