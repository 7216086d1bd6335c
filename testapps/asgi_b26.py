"""B26: a client that cancels a streaming response must let the app clean
up (granian#412), and send() after the disconnect (DESIGN.md, ASGI).

/sse         start + "data: hi\\n\\n" (more_body), then a producer that
             never produces (await asyncio.Event().wait()) beside a
             receive() watcher; on http.disconnect the watcher cancels the
             producer; `cleanups` grows in the finally block
/send-after?catch|escape
             start + one event, waits for http.disconnect, then calls
             send() again and records the exception's class (catch: the
             app swallows it; escape: it lets it escape the app, as older
             frameworks do)
/longpoll    reads the (empty) body, then awaits receive() with no
             response started; records the message it gets ("longpoll")
/upload      reads the body; records the message types it got, ending with
             http.disconnect when the client leaves mid-body ("upload")
/after-response
             reads the body, sends a whole response, then awaits receive() (5 s limit) and
             records the message and how long it took ("after_response")
/stats       {"cleanups", "disconnects", "send_after": [...], "longpoll",
             "upload", "after_response", "tasks"}
/pid         the worker's pid
"""

import asyncio
import json
import os
import time

stats = {"cleanups": 0, "disconnects": 0, "send_after": [], "longpoll": [], "upload": [], "after_response": []}


async def start_stream(send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    await send({"type": "http.response.body", "body": b"data: hi\n\n", "more_body": True})


async def sse(receive, send):
    await start_stream(send)
    producer = asyncio.ensure_future(asyncio.Event().wait())

    async def watcher():
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                stats["disconnects"] += 1
                producer.cancel()
                return

    w = asyncio.ensure_future(watcher())
    try:
        await producer
    except asyncio.CancelledError:
        pass
    finally:
        w.cancel()
        stats["cleanups"] += 1


async def send_after(mode, receive, send):
    await start_stream(send)
    while (await receive())["type"] != "http.disconnect":
        pass
    try:
        await send({"type": "http.response.body", "body": b"data: late\n\n", "more_body": True})
    except BaseException as exc:
        stats["send_after"].append({"mode": mode, "class": type(exc).__name__,
                                    "oserror": isinstance(exc, OSError)})
        if mode == "escape":
            raise
    else:
        stats["send_after"].append({"mode": mode, "class": None, "oserror": False})


async def longpoll(receive):
    while (await receive()).get("more_body"):
        pass
    message = await receive()  # nothing will be sent: only a disconnect ends this
    stats["longpoll"].append(message["type"])


async def upload(receive):
    types = []
    while True:
        message = await receive()
        types.append(message["type"])
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    stats["upload"].append(types[-1] + " after %d http.request" % (len(types) - 1))


async def after_response(receive, send):
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"complete"})
    t0 = time.monotonic()
    try:
        message = await asyncio.wait_for(receive(), 5)
        kind = message["type"]
    except asyncio.TimeoutError:
        kind = "timeout"
    stats["after_response"].append({"type": kind, "ms": round((time.monotonic() - t0) * 1000)})


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/sse":
        return await sse(receive, send)
    if path == "/send-after":
        return await send_after(scope["query_string"].decode(), receive, send)
    if path == "/longpoll":
        return await longpoll(receive)
    if path == "/upload":
        return await upload(receive)
    if path == "/after-response":
        return await after_response(receive, send)
    if path == "/pid":
        body = str(os.getpid()).encode()
    else:
        body = json.dumps(dict(stats, tasks=len(asyncio.all_tasks()))).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
