"""Workers (issue 8): an app whose views kill their own worker process.

/          "ok <pid>"
/segv      writes a line to stderr, then reads address 0 in C
           (ctypes.string_at(0)): a segfault in a C extension, which
           leaves no Python stack
"""

import ctypes
import os
import sys

PID = str(os.getpid()).encode()


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/segv":
        print("sup_crash: about to read address 0 in pid %d" % os.getpid(), file=sys.stderr, flush=True)
        ctypes.string_at(0)
    body = b"ok " + PID
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
