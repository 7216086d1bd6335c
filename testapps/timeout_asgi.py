"""Issue 29: --timeout for ASGI is a loop that does not turn, not a request
that awaits.

/sleep?S  awaits asyncio.sleep(S) (default 5): the loop stays free
/block?S  time.sleep(S) on the loop (default 4): the loop does not turn
/         "ok"
"""

import asyncio
import time


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path, query = scope["path"], scope["query_string"].decode()
    if path == "/sleep":
        await asyncio.sleep(float(query or "5"))
        body = b"slept"
    elif path == "/block":
        time.sleep(float(query or "4"))
        body = b"blocked"
    else:
        body = b"ok"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
