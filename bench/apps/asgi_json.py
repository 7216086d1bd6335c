"""ASGI JSON: the ASGI twin of jsonapp.py, json.dumps of a small dict per request."""

import json


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "http":
        body = json.dumps(
            {"message": "Hello, World!", "path": scope["path"], "items": [1, 2, 3], "ok": True}
        ).encode()
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        })
        await send({"type": "http.response.body", "body": body})
    elif kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
