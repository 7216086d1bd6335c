"""B27: streaming backpressure.

/gen         app B: a generator of 64 KiB chunks (16384 of them, 1 GiB),
             counting how many it has produced
/pid         the worker's pid
/count       the count of the stream in flight (and whether it ended)
/file?PATH   app A: wsgi.file_wrapper over PATH with 64 KiB blocks
"""

import os
import threading
import urllib.parse

CHUNK = b"x" * 65536
_lock = threading.Lock()
produced = 0
closed = False


def app(environ, start_response):
    global produced, closed
    path = environ["PATH_INFO"]
    if path == "/pid":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(os.getpid()).encode()]
    if path == "/count":
        with _lock:
            body = f"{produced} {int(closed)}".encode()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body]
    if path == "/file":
        fname = urllib.parse.unquote(environ["QUERY_STRING"])
        f = open(fname, "rb")
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](f, 65536)

    with _lock:
        produced, closed = 0, False

    def gen():
        global produced, closed
        try:
            for _ in range(16384):
                with _lock:
                    produced += 1
                yield CHUNK
        finally:
            with _lock:
                closed = True

    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return gen()
