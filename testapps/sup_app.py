"""Workers (issue 8): an app that says which worker process answered.

/         "ok <pid>"
/sleep?S  sleeps S seconds (default 2), answers "done <pid>"
/hold?S   holds the GIL for S seconds inside C (libc sleep through
          ctypes.PyDLL, which does not release it): the whole worker is
          stuck, as with a long regex or a C extension that keeps the GIL
"""

import ctypes
import os
import time

PID = str(os.getpid()).encode()
_libc = ctypes.PyDLL(None)  # PyDLL: calls keep the GIL


def app(environ, start_response):
    path, query = environ["PATH_INFO"], environ["QUERY_STRING"]
    if path == "/sleep":
        time.sleep(float(query or "2"))
        body = b"done " + PID
    elif path == "/hold":
        _libc.usleep(int(float(query or "5") * 1e6))
        body = b"held " + PID
    else:
        body = b"ok " + PID
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
