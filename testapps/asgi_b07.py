"""B07: receive() after the complete body must wait, not return another
http.request (nginx/unit#1561). The app as the case states it
(docs/cases.md): 200 when a further receive() times out (0.5 s) while the
client is still connected, 500 when it returns anything."""

import asyncio


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    data = b""
    while True:
        m = await receive(); data += m.get("body", b"")
        if not m.get("more_body"): break
    try:
        extra = await asyncio.wait_for(receive(), 0.5)
        code = 500          # got *something* while the client is still connected
    except asyncio.TimeoutError:
        code = 200
    await send({"type": "http.response.start", "status": code, "headers": []})
    await send({"type": "http.response.body", "body": data})
