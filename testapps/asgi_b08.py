"""B08: an extra http.response.body after completion must not kill the
worker (granian#707). The app as the case states it (docs/cases.md): the
body "late" must never reach the client."""


async def app(scope, receive, send):
    if scope["type"] != "http": return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"done", "more_body": False})
    await send({"type": "http.response.body", "body": b"late"})   # must be ignored
