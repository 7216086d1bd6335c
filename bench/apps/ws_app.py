"""The WebSocket app of bench/ws-load (raw ASGI, so every server runs the
same code).

/echo       echo every message (text or bytes) until the client leaves.
/room/<k>   join room k; every text message is pushed to every member of
            the room, the sender included (the "rooms" shape).
"""

rooms = {}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            await send({"type": msg["type"] + ".complete"})
            if msg["type"] == "lifespan.shutdown":
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    path = scope["path"]
    if path.startswith("/room/"):
        members = rooms.setdefault(path, set())
        members.add(send)
        try:
            while True:
                msg = await receive()
                if msg["type"] == "websocket.disconnect":
                    return
                out = {"type": "websocket.send", "text": msg.get("text")}
                for member in list(members):
                    try:
                        await member(out)
                    except OSError:
                        members.discard(member)
        finally:
            members.discard(send)
    else:
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            if msg.get("text") is not None:
                await send({"type": "websocket.send", "text": msg["text"]})
            else:
                await send({"type": "websocket.send", "bytes": msg["bytes"]})
