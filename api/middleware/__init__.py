"""The ASGI layers every request passes (api/app.py stacks them): request metrics, the Host/Origin guard, CORS,
the bearer token. One file each; they import only api/http."""
