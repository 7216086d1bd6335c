"""Lifespan shutdown on SIGTERM (tests/asgi_test.go, TestB09_*).

GET /arm?PATH   remember PATH; lifespan shutdown writes "shutdown complete"
                (and whether startup ran) to it.
"""

import asyncio

marker = None
started = False


async def app(scope, receive, send):
    global marker, started
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                started = True
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.sleep(0.2)  # shutdown may await, too
                if marker:
                    with open(marker, "w") as f:
                        f.write("shutdown complete after startup=%s" % started)
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/arm":
        marker = scope["query_string"].decode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"armed" if marker else b"ok"})
