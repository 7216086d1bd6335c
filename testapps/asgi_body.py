"""ASGI request bodies (tests/asgi_test.go, TestASGI_Body*).

/sha     reads the body with receive() until more_body is false; answers
         {"len", "sha256", "receives", "types"}: how many receive() calls
         it took and the message types seen
/cancel  like /sha, but every receive() is wrapped in
         asyncio.wait_for(receive(), 0.3): a receive() cancelled by the
         timeout must consume nothing, so the body still arrives whole and
         in order; answers {"len", "sha256", "body", "timeouts"}
"""

import asyncio
import hashlib
import json


async def answer(send, obj):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(obj).encode()})


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    h = hashlib.sha256()
    n = receives = timeouts = 0
    types = []
    body = b""
    cancel = scope["path"] == "/cancel"
    while True:
        if cancel:
            try:
                m = await asyncio.wait_for(receive(), 0.3)
            except asyncio.TimeoutError:
                timeouts += 1
                continue
        else:
            m = await receive()
        receives += 1
        types.append(m["type"])
        if m["type"] != "http.request":
            break
        chunk = m.get("body", b"")
        h.update(chunk)
        n += len(chunk)
        if cancel:
            body += chunk
        if not m.get("more_body", False):
            break
    out = {"len": n, "sha256": h.hexdigest(), "receives": receives, "types": sorted(set(types))}
    if cancel:
        out["timeouts"] = timeouts
        out["body"] = body.decode("latin-1")
    await answer(send, out)
