"""What every request passes before the routes: request metrics, the Host/Origin guard, CORS, the bearer token,
one file each, run in one ASGI layer (gate.py, which api/app.py adds). They import only api/http."""
