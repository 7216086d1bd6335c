"""The loop-stall scenario's ASGI app (bench/loop-stall/run.py).

GET /       the fast route: a plain-text hello
GET /block  blocks the event loop: time.sleep(0.2) in an async view, the
            mistake case B35 is about
"""
import time


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/block":
        time.sleep(0.2)  # blocks the loop: every other request waits
        body = b"blocked 200 ms\n"
    else:
        body = b"Hello, World!\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
