"""WebSockets across a stop or a rolling restart (issue 29), for
tests/ws_restart_test.go.

/record?file=PATH  accept, then for every message: append its text as a
                   line to PATH (flushed), then echo it; on
                   websocket.disconnect append "disconnect CODE" and return.
                   A plain app: a send() that raises ends it, as it would
                   end most apps.
/push?file=PATH    accept, then send "tick" every 10 ms and never read; when
                   send() raises, write "send raised" to PATH and return.
/echo              accept, echo every message until disconnect.
HTTP /             "ok <pid>".
"""

import asyncio
import os
import urllib.parse

PID = str(os.getpid())


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": ("ok " + PID).encode()})
        return
    msg = await receive()
    assert msg["type"] == "websocket.connect", msg
    await send({"type": "websocket.accept", "headers": [(b"x-pid", PID.encode())]})
    if scope["path"] == "/push":
        qs = urllib.parse.parse_qs(scope["query_string"].decode())
        while True:
            try:
                await send({"type": "websocket.send", "text": "tick"})
            except OSError:
                with open(qs["file"][0], "w") as f:
                    f.write("send raised")
                return
            await asyncio.sleep(0.01)
    if scope["path"] == "/record":
        qs = urllib.parse.parse_qs(scope["query_string"].decode())
        with open(qs["file"][0], "a", buffering=1) as f:
            while True:
                msg = await receive()
                if msg["type"] == "websocket.disconnect":
                    f.write("disconnect %d\n" % msg["code"])
                    return
                f.write(msg["text"] + "\n")
                await send({"type": "websocket.send", "text": msg["text"]})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            return
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"]})
        else:
            await send({"type": "websocket.send", "bytes": msg["bytes"]})
