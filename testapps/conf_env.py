"""tests/config_review_test.go: the TURNSTILE_* variables the app (and so
its subprocesses) can see, in os.environ and in the C environment."""

import ctypes
import json
import os

_libc = ctypes.CDLL(None)
_libc.getenv.restype = ctypes.c_char_p
_libc.getenv.argtypes = [ctypes.c_char_p]


def app(environ, start_response):
    names = ["TURNSTILE_WORKER", "TURNSTILE_WORKER_ADMIN", "TURNSTILE_WORKER_SETTINGS"]
    body = json.dumps({
        "pid": os.getpid(),
        "os_environ": sorted(k for k in os.environ if k.startswith("TURNSTILE_")),
        "c_environ": sorted(n for n in names if _libc.getenv(n.encode()) is not None),
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
