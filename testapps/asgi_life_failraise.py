"""Lifespan startup that says lifespan.startup.failed and then raises, as
Starlette does, with a message holding a lone surrogate
(tests/asgi_test.go, TestB09_LifespanFailedThenRaise)."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "turnstile-lf-7c1 caf\udce9"})
        raise RuntimeError("turnstile-lf-raise-7c1")
