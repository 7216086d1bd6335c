"""Several event loops per worker (--loops, issue 22): tests/loops_test.go.

Every answer names the loop thread that served it (ts-loop-N). The
lifespan state is per loop: startup records the loop it ran on. Module
state shared by the loops is guarded by a threading.Lock, as the README
asks; _shared_lock is the mistake it warns about (an asyncio.Lock used
from two loops).

LOOPS_RECORD, when set, is a file the app appends a line to for each
lifespan shutdown and each websocket.disconnect. LOOPS_FAIL_ON names the
loop thread whose lifespan startup fails.
"""

import asyncio
import os
import threading
import time

from asgiref.sync import sync_to_async  # imported with the app: turnstile binds from the first request

_lock = threading.Lock()  # guards _started: module state the loops share
_started = []  # the loop threads whose lifespan startup ran
_shared_lock = asyncio.Lock()  # wrong on purpose: one asyncio object for every loop


def _record(line):
    path = os.environ.get("LOOPS_RECORD")
    if path:
        with _lock, open(path, "a") as f:
            f.write(line + "\n")


def _name():
    return threading.current_thread().name


def _os_name():
    """The OS name of the calling thread (as in top -H): pool threads are
    ts-http-N there, not in threading."""
    with open("/proc/self/task/%d/comm" % threading.get_native_id()) as f:
        return f.read().strip()


async def _text(send, body, status=200):
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body.encode()})


async def _lifespan(scope, receive, send):
    while True:
        m = await receive()
        if m["type"] == "lifespan.startup":
            if _name() == os.environ.get("LOOPS_FAIL_ON"):
                _record("failed " + _name())
                await send({"type": "lifespan.startup.failed", "message": "no database on " + _name()})
                continue
            scope["state"]["thread"] = _name()
            scope["state"]["loop"] = asyncio.get_running_loop()
            scope["state"]["queue"] = asyncio.Queue()  # belongs to this loop
            with _lock:
                _started.append(_name())
            await send({"type": "lifespan.startup.complete"})
        elif m["type"] == "lifespan.shutdown":
            _record("shutdown " + _name())
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _ws(scope, receive, send):
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": _name()})
    while True:
        m = await receive()
        if m["type"] == "websocket.disconnect":
            _record("disconnect %s %d" % (_name(), m.get("code", 0)))
            return
        await send({"type": "websocket.send", "text": m.get("text") or ""})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await _lifespan(scope, receive, send)
    if scope["type"] == "websocket":
        return await _ws(scope, receive, send)
    path = scope["path"]
    if path == "/thread":
        return await _text(send, _name())
    if path == "/block":
        time.sleep(2)  # blocks this loop only
        return await _text(send, _name())
    if path == "/block-after":
        # answer, then block the loop: no request is in flight on it, so
        # only its stall keeps new connections away
        asyncio.get_running_loop().call_soon(time.sleep, 2)
        return await _text(send, _name())
    if path == "/state":
        st = scope["state"]
        q = st["queue"]
        q.put_nowait(1)
        await q.get()  # an asyncio object of this loop's startup: works here
        own = st["loop"] is asyncio.get_running_loop()
        with _lock:
            started = sorted(_started)
        return await _text(send, "%s %s %s %s" % (_name(), st["thread"], own, ",".join(started)))
    if path == "/sync":
        # asgiref's thread-sensitive call: on the worker's HTTP pool
        # (ts-http-N), shared by the loops, and back on this loop
        ran_on = await sync_to_async(_os_name, thread_sensitive=True)()
        await asyncio.to_thread(_name)  # the parked executor, shared too
        return await _text(send, "%s %s" % (_name(), ran_on))
    if path == "/lock":
        async with _shared_lock:
            await asyncio.sleep(0.5)
        return await _text(send, "locked " + _name())
    await _text(send, "not found", 404)
