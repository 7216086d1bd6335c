"""Lifespan startup that takes 2 s (tests/asgi_test.go, TestASGI_ReadyzAfterStartup):
/readyz on the admin listener must answer 503 until it completes."""

import asyncio
import time

startup_done_at = None


async def app(scope, receive, send):
    global startup_done_at
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await asyncio.sleep(2)
                startup_done_at = time.time()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = ("ready startup_done_at=%.3f" % startup_done_at).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
