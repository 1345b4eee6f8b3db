"""The live view: WebRTC viewers, shared control, takeover, NAT."""
