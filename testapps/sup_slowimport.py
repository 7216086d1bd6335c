"""Workers (issue 8): an import that burns CPU for SECONDS (3.5; the
issue's case says 10 s, shortened to keep CI fast) before the app exists,
as a big framework or a model load does. Two workers importing it at once
must both start, and neither may be taken for stalled and restarted.
"""

import os
import time

SECONDS = float(os.environ.get("SUP_IMPORT_SECONDS", "3.5"))

_end = time.process_time() + SECONDS
_n = 0
while time.process_time() < _end:
    _n += sum(range(1000))

PID = str(os.getpid()).encode()


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok " + PID]
