"""An ASGI app that runs pytest inside turnstile, on a thread of the
server's executor: GET /run?path=DIR runs the tests in DIR with the
chlayer_redis_compat plugin and answers {"rc": exit code, "output": the
terminal report}. The layer under test needs the server
(turnstile.channels exists only there), so its tests run here, not under
plain Python. Output is captured at the sys level only (pytest's fd
capture would take the server's own stderr)."""

import asyncio
import contextlib
import io
import json
import urllib.parse


def run_pytest(args):
    import pytest

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = pytest.main(args)
    return int(rc), out.getvalue()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    q = urllib.parse.parse_qs(scope["query_string"].decode())
    path = q.get("path", [""])[0]
    args = [
        path,
        "-p", "chlayer_redis_compat",
        "-p", "no:cacheprovider",
        "--capture=sys",
        "-o", "asyncio_mode=auto",
        "-o", "asyncio_default_fixture_loop_scope=function",
        "-rsxX",
        "--no-header",
    ]
    if q.get("s"):
        args += ["-s"]
    if q.get("k"):
        args += ["-k", q["k"][0]]
    rc, output = await asyncio.to_thread(run_pytest, args)
    body = json.dumps({"rc": rc, "output": output}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
