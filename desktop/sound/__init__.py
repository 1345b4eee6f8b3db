"""A desktop's sound: its PulseAudio (server.py) and the one reader of it every listener shares (capture.py);
docs/audio.md. Imports only desktop/core."""
