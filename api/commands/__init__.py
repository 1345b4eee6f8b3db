"""The command WebSocket (docs/websocket.md): every operation of the table as JSON messages on one connection,
dispatched through the same app as an HTTP request, so its models, problems and checks are the HTTP ones."""
