"""Lifespan: an app that does not support lifespan and raises on the
lifespan scope, as many plain HTTP apps do (tests/asgi_test.go, TestB09_*).

With --lifespan auto the server goes on without lifespan and says so once;
with --lifespan on it must not start. HTTP requests get "ok" and whether
the scope carries a "state" key.
"""

LIFESPAN_CALLS = 0


async def app(scope, receive, send):
    global LIFESPAN_CALLS
    if scope["type"] == "lifespan":
        LIFESPAN_CALLS += 1
    assert scope["type"] == "http", "asgi_life_raise only speaks http, not " + scope["type"]
    body = ("ok state=%s lifespan_calls=%d" % ("state" in scope, LIFESPAN_CALLS)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
