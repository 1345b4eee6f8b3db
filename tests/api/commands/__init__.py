"""The command WebSocket (docs/websocket.md)."""
