"""An ASGI app that raises, for the log record's shape (tests/logs_test.go,
TestLogs_ASGIErrorRecord): the same record as err_app's WSGI /raise.

/raise        raises RuntimeError over HTTP, before any response
/ws (WebSocket) accepts, then raises RuntimeError
anything else 200 "ok"
"""

SECRET = "err-secret-7f3a"  # as err_app.SECRET


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                raise RuntimeError(f"boom at shutdown {SECRET}")
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        raise RuntimeError(f"boom on a WebSocket {SECRET}")
    if scope["path"] == "/raise":
        raise RuntimeError(f"boom {SECRET}")
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
