"""Live WebRTC view of the desktop (aiortc): peers, video track, signalling, data-channel input."""
