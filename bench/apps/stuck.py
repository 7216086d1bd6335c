"""Workers scenario (bench/workers.py): a fast route and a route that
stalls its whole worker process.

/          13-byte hello (the fast route that is measured)
/hold?S    holds the GIL for S seconds inside C (libc usleep through
           ctypes.PyDLL, which keeps the GIL), as a C extension or a
           pathological regex does: no thread of that process runs Python
           until it returns.
"""

import ctypes

BODY = b"Hello, World!"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]
_libc = ctypes.PyDLL(None)


def app(environ, start_response):
    if environ["PATH_INFO"] == "/hold":
        _libc.usleep(int(float(environ["QUERY_STRING"] or "5") * 1e6))
        body = b"held"
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
        return [body]
    start_response("200 OK", HEADERS)
    return [BODY]
