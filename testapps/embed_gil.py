"""Embedding pitfall: a view that holds the GIL inside C.

/spin?N  re.match(r"(a+)+b", "a" * N): catastrophic backtracking inside the
         _sre C engine, which never releases the GIL; answers the seconds
/ping    answers "pong" (needs the GIL)
"""

import re
import time

PATTERN = re.compile(r"(a+)+b")


def app(environ, start_response):
    if environ["PATH_INFO"] == "/spin":
        n = int(environ["QUERY_STRING"] or "24")
        t0 = time.perf_counter()
        PATTERN.match("a" * n)
        body = f"{time.perf_counter() - t0:.3f}".encode()
    else:
        body = b"pong"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
