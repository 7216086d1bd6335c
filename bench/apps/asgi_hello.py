"""ASGI hello: the ASGI twin of hello.py (http only; lifespan accepted)."""

BODY = b"Hello, World!"
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())],
}
END = {"type": "http.response.body", "body": BODY}


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "http":
        await send(START)
        await send(END)
    elif kind == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
