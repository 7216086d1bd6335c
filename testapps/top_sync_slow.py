"""ASGI app whose /slow is a sync view (asgiref's sync_to_async, on a
ts-http thread) sleeping 1.5 s: turnstile top shows the thread and the
slow call (issue 26's review)."""

import time

from asgiref.sync import sync_to_async


def slow_view():
    time.sleep(1.5)


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await sync_to_async(slow_view)()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
