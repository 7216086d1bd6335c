"""WSGI app of the pool-fairness probe (issue 4).

/busy?ms=X  spins a pure-Python loop until this thread has used X ms of CPU
            (time.thread_time, so time spent waiting for the GIL does not
            count as work done)
/sleep?s=X  time.sleep(X): releases the GIL (the "not a mutex" check)
/           ok
"""
import time
from urllib.parse import parse_qs


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    q = parse_qs(environ.get("QUERY_STRING", ""))
    if path == "/busy":
        ms = float(q.get("ms", ["0.3"])[0])
        end = time.thread_time() + ms / 1000.0
        n = 0
        while time.thread_time() < end:
            n += 1
        body = b"busy %d\n" % n
    elif path == "/sleep":
        time.sleep(float(q.get("s", ["0.05"])[0]))
        body = b"slept\n"
    else:
        body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
