"""ASGI app for the 103 Early Hints tests (http.response.early_hint).

/hints   early_hint with two links, then 200 "ok"; the body says whether
         the scope advertised the extension
/hints-404  early_hint, then 404 with x-final: yes
/late    200 start, then an early_hint (ignored: after the head), then "ok"
/bad     an early_hint whose link holds CR LF: send() raises, so 500
"""

LINKS = [b"</style.css>; rel=preload; as=style", b"</app.js>; rel=preload; as=script"]


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    has = "http.response.early_hint" in scope.get("extensions", {})
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
    if path == "/hints":
        await send({"type": "http.response.early_hint", "links": LINKS})
        await send(start)
    elif path == "/hints-404":
        await send({"type": "http.response.early_hint", "links": LINKS})
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"text/plain"), (b"x-final", b"yes")]})
    elif path == "/late":
        await send(start)
        await send({"type": "http.response.early_hint", "links": LINKS})
    elif path == "/bad":
        await send({"type": "http.response.early_hint", "links": [b"</x>\r\nSet-Cookie: a=b"]})
        await send(start)
    else:
        await send(start)
    await send({"type": "http.response.body", "body": b"ok extension=%d" % has})
