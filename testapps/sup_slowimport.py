"""Workers (issue 8): an import that burns SECONDS of CPU (10 by default,
the issue's case; SUP_IMPORT_SECONDS) in pure Python, holding the GIL,
before the app exists, as a big framework or a model load does. Two
workers importing it at once must both start, and neither may be taken for
stalled and restarted.
"""

import os
import time

SECONDS = float(os.environ.get("SUP_IMPORT_SECONDS", "10"))

_end = time.thread_time() + SECONDS  # this thread's CPU: at least SECONDS of wall time
_n = 0
while time.thread_time() < _end:
    _n += sum(range(1000))

PID = str(os.getpid()).encode()


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok " + PID]
