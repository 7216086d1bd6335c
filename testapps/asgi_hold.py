"""Requests held in flight (tests/asgi_test.go, TestASGI_InFlightMemory).

/pid    the worker's pid
/hold   awaits asyncio.sleep(60) before answering: a long poll that holds
        nothing but its request
"""

import asyncio
import os


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b"ok"
    if scope["path"] == "/pid":
        body = str(os.getpid()).encode()
    elif scope["path"] == "/hold":
        await asyncio.sleep(60)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
