"""Lifespan: an app whose lifespan task raises after startup completed,
long before any shutdown (tests/asgi_test.go,
TestB09_LifespanRaiseAfterStartup)."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        raise RuntimeError("asgi_life_after: raised after startup")
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
