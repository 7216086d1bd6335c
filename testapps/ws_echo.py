"""A raw ASGI WebSocket app for tests/websocket_test.go.

/echo      accept (offering the first subprotocol the client asked for, and a
           header), then echo every text and bytes message until disconnect.
/scope     accept, send the scope as JSON, close.
/slow      accept, then consume nothing until told (back-pressure test):
           GET /stats reports what it has seen.
Other paths: HTTP 200 "ok".
"""

import asyncio
import json
import os

stats = {"received": 0, "disconnects": [], "connects": 0}


def _jsonable(v):
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


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
        body = json.dumps(stats).encode() if scope["path"] == "/stats" else b"ok"
        if scope["path"] == "/pid":
            body = str(os.getpid()).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
        return
    assert scope["type"] == "websocket"
    msg = await receive()
    assert msg["type"] == "websocket.connect", msg
    stats["connects"] += 1
    path = scope["path"]
    if path == "/scope":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps(_jsonable({k: v for k, v in scope.items() if k != "state"}))})
        await send({"type": "websocket.close", "code": 1000})
        return
    sub = scope["subprotocols"][0] if scope["subprotocols"] else None
    await send({"type": "websocket.accept", "subprotocol": sub, "headers": [(b"x-accept", b"yes")]})
    if path == "/slow":
        await asyncio.sleep(3600)
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            stats["disconnects"].append([msg["code"], msg.get("reason", "")])
            return
        stats["received"] += 1
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"]})
        else:
            await send({"type": "websocket.send", "bytes": msg["bytes"]})
