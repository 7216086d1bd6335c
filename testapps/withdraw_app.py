"""Issue 29: waiting is not running, and abandoned work is withdrawn.

/sleep?S  sleeps S seconds (default 1), answers "slept"
/work?S   counts itself as started, sleeps S seconds (default 0.25): the
          view a burst of abandoned clients asks for
/ran      how many /work requests a thread started, as text
/         "ok"
"""

import threading
import time

_lock = threading.Lock()
_ran = 0


def app(environ, start_response):
    global _ran
    path, query = environ["PATH_INFO"], environ["QUERY_STRING"]
    if path == "/sleep":
        time.sleep(float(query or "1"))
        body = b"slept"
    elif path == "/work":
        with _lock:
            _ran += 1
        time.sleep(float(query or "0.25"))
        body = b"worked"
    elif path == "/ran":
        body = str(_ran).encode()
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
