"""WSGI app for tests/gilwait_test.go: /busy?ms=N runs N ms of pure-Python
CPU (holding the GIL except when CPython's switch interval makes it drop)."""
import time


def app(environ, start_response):
    ms = float(environ.get("QUERY_STRING") or "100")
    end = time.thread_time() + ms / 1000
    n = 0
    while time.thread_time() < end:
        n += 1
    body = b"%d\n" % n
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
