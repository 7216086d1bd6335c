"""The WebSocket app of bench/ws-load (raw ASGI, so every server runs the
same code).

/echo       echo every message (text or bytes) until the client leaves.
/room/<k>   join room k; every text message is pushed to every member of
            the room, the sender included (the "rooms" shape).
/ticks      server push (the "ticks" shape): a task of the connection sends
            "<time_ns> <pad>" every ?ms= milliseconds (50), ?size= bytes
            (32), until the client leaves.
/bcast      server push from one loop (the "bcast" shape): every ?ms= (50)
            one task sends the frame to every connection of /bcast in turn.
"""

import asyncio
import time
from urllib.parse import parse_qs

rooms = {}
bcast = set()
bcast_task = None


def _params(scope):
    q = parse_qs(scope.get("query_string", b"").decode())
    return int(q.get("ms", ["50"])[0]) / 1000, int(q.get("size", ["32"])[0])


def _frame(size):
    head = str(time.time_ns())
    return head + " " + "x" * max(size - len(head) - 1, 0)


async def _ticks(send, every, size):
    loop = asyncio.get_running_loop()
    due = loop.time()
    while True:
        due += every
        await asyncio.sleep(max(due - loop.time(), 0))
        try:
            await send({"type": "websocket.send", "text": _frame(size)})
        except OSError:
            return


async def _bcast(every, size):
    loop = asyncio.get_running_loop()
    due = loop.time()
    while bcast:
        due += every
        await asyncio.sleep(max(due - loop.time(), 0))
        text = _frame(size)
        for member in list(bcast):
            try:
                await member({"type": "websocket.send", "text": text})
            except OSError:
                bcast.discard(member)


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
    if path == "/ticks":
        task = asyncio.ensure_future(_ticks(send, *_params(scope)))
        try:
            while (await receive())["type"] != "websocket.disconnect":
                pass
        finally:
            task.cancel()
        return
    if path == "/bcast":
        global bcast_task
        bcast.add(send)
        if bcast_task is None or bcast_task.done():
            bcast_task = asyncio.ensure_future(_bcast(*_params(scope)))
        try:
            while (await receive())["type"] != "websocket.disconnect":
                pass
        finally:
            bcast.discard(send)
        return
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
