"""ASGI app for the TLS and HTTP/2 tests, and case B25 (granian#917): an
HTTP/2 stream reset (RST_STREAM) must reach the app as http.disconnect.

/            the scope as JSON (http_version, scheme, headers, ...) and
             the body length
/sse         start + one event (more_body), then awaits receive(); on
             http.disconnect records the wall-clock time it arrived in
             "last_disconnect"; its finally block counts "cleanups"
/stats       {"cleanups", "disconnects", "last_disconnect", "tasks"}
             (tasks: asyncio tasks alive, this request's included)
"""

import asyncio
import json
import time

stats = {"cleanups": 0, "disconnects": 0, "last_disconnect": 0.0}


async def sse(receive, send):
    try:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": b"data: hi\n\n", "more_body": True})
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                stats["disconnects"] += 1
                stats["last_disconnect"] = time.time()
                return
    finally:
        stats["cleanups"] += 1


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/sse":
        return await sse(receive, send)
    if path == "/stats":
        out = dict(stats, tasks=len(asyncio.all_tasks()))
        body = json.dumps(out).encode()
    else:
        n = 0
        while True:
            message = await receive()
            n += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.dumps({
            "http_version": scope["http_version"],
            "scheme": scope["scheme"],
            "method": scope["method"],
            "path": scope["path"],
            "query_string": scope["query_string"].decode(),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
            "body_len": n,
        }).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close"),
                            (b"upgrade", b"h2c"), (b"te", b"gzip"), (b"x-app", b"h2")]})
    await send({"type": "http.response.body", "body": body})
