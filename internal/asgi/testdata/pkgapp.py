"""The ASGI app of the asgi package's tests (asgi_test.go): one route per
behaviour of the package, in the ASGI spec's messages."""
import asyncio
import json
import threading

state_seen = {}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "hello from startup"
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        m = await receive()
        assert m["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        while True:
            m = await receive()
            if m["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "echo: " + (m.get("text") or "")})
    path = scope["path"]
    if path == "/hello":
        await respond(send, 200, b"Hello, World!")
    elif path == "/echo":
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        await respond(send, 200, body)
    elif path == "/scope":
        out = {k: v for k, v in scope.items() if isinstance(v, (str, int, bool))}
        out["asgi"] = scope["asgi"]
        out["greeting"] = scope.get("state", {}).get("greeting")
        out["thread"] = threading.current_thread().name
        out["query_string"] = scope["query_string"].decode()
        await respond(send, 200, json.dumps(out).encode(), b"application/json")
    elif path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(3):
            await send({"type": "http.response.body", "body": b"part%d " % i, "more_body": True})
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"end"})
    elif path == "/raise":
        raise RuntimeError("the app's own failure")
    elif path == "/no-response":
        return
    elif path == "/bad-message":
        await send({"type": "http.response.start", "status": "two hundred"})
    else:
        await respond(send, 404, b"not found")


async def respond(send, status, body, ctype=b"text/plain"):
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]})
    await send({"type": "http.response.body", "body": body})
