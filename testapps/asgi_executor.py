"""The loop's default executor (tests/asgi_test.go, TestASGI_Executor):
what asyncio.to_thread and loop.run_in_executor(None, ...) use.

/to_thread?MS          await asyncio.to_thread(f): f sleeps MS ms and
                       answers its thread's name and ident
/run_in_executor?MS    the same through loop.run_in_executor(None, f)
/threads               {"count": threading.active_count(), "names": [...]}
/ctx/to_thread?V       sets the ContextVar to V in the request, then reports
                       what a function run by asyncio.to_thread sees
/ctx/executor-set?V    a function run by run_in_executor(None, ...) reports
                       the var, then sets it to V
/ctx/executor-get      a function run by run_in_executor(None, ...) reports
                       the var
"""

import asyncio
import contextvars
import json
import threading
import time

var = contextvars.ContextVar("asgi_executor", default="unset")


def where(ms):
    time.sleep(ms / 1000)
    t = threading.current_thread()
    return {"name": t.name, "ident": t.ident}


def set_var(v):
    before = var.get()
    var.set(v)
    return before


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path, q = scope["path"], scope["query_string"].decode()
    loop = asyncio.get_running_loop()
    if path == "/to_thread":
        out = await asyncio.to_thread(where, float(q or 0))
    elif path == "/run_in_executor":
        out = await loop.run_in_executor(None, where, float(q or 0))
    elif path == "/threads":
        out = {"count": threading.active_count(), "names": sorted(t.name for t in threading.enumerate())}
    elif path == "/ctx/to_thread":
        var.set(q)
        out = await asyncio.to_thread(var.get)
    elif path == "/ctx/executor-set":
        out = await loop.run_in_executor(None, set_var, q)
    elif path == "/ctx/executor-get":
        out = await loop.run_in_executor(None, var.get)
    else:
        out = "no route " + path
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(out).encode()})
