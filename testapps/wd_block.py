"""ASGI app whose routes block the event loop in the ways people hit, for
the watchdog tests (case B35 and issue 7). Each blocker lasts about
BLOCK_S seconds; /health answers at once when the loop is free; /nap
awaits asyncio.sleep(0.5), holding nothing."""

import asyncio
import re
import socket
import sqlite3
import threading
import time

BLOCK_S = 3.0
_lock = threading.Lock()


def hold_lock():
    with _lock:
        time.sleep(BLOCK_S + 0.5)


def hold_gil_in_c():
    return sum(range(120_000_000))  # the GIL hog: one C call, ~2 s


def busy_python(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/sleep":
        time.sleep(BLOCK_S)  # the blocker of case B35
    elif path == "/cpu":
        busy_python(BLOCK_S)
    elif path == "/regex":
        re.match(r"(a+)+b", "a" * 27)  # holds the GIL in C
    elif path == "/socket":
        a, b = socket.socketpair()
        a.settimeout(BLOCK_S)
        try:
            a.recv(1)  # nothing ever arrives
        except socket.timeout:
            pass
        finally:
            a.close()
            b.close()
    elif path == "/lock":
        t = threading.Thread(target=hold_lock)
        t.start()
        time.sleep(0.05)
        _lock.acquire()  # held by the thread for BLOCK_S
        _lock.release()
        t.join()
    elif path == "/gilthread":
        # A background thread holds the GIL in one C call (sum over a
        # range: no eval-breaker check) while the loop only awaits: the
        # loop stalls waiting for the GIL and its own stack looks idle.
        t = threading.Thread(target=hold_gil_in_c, name="gil-hog")
        t.start()
        await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
    elif path == "/nap":
        await asyncio.sleep(0.5)
    elif path == "/block":
        # /block?ms=N: time.sleep for N ms (stalls just past the threshold)
        ms = int(scope["query_string"].decode().partition("=")[2] or "130")
        time.sleep(ms / 1000)
    elif path == "/sqlite":
        db = sqlite3.connect(":memory:")
        db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 40000000) SELECT count(*) FROM c").fetchone()
        db.close()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": path.encode()})
