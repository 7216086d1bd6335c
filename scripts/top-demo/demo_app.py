"""ASGI app for the README's `turnstile top` picture: /slow is a sync view
(asgiref's sync_to_async, on a ts-http thread) that sleeps; /stall blocks
the event loop; anything else answers at once."""

import time

from asgiref.sync import sync_to_async


def slow_view():
    time.sleep(4)


def stall_loop():
    time.sleep(2)


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await sync_to_async(slow_view)()
    elif scope["path"] == "/stall":
        stall_loop()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
