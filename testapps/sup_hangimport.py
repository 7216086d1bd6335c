"""Workers (issue 8): an import that never finishes (it sleeps
SUP_HANG_SECONDS, default 60), as an app waiting for an unreachable
database at import does. With a short --startup-timeout the master must
stop with exit status 1 and say why, at first start: never a respawn loop.
"""

import os
import sys
import time

print("sup_hangimport: waiting at import in pid %d" % os.getpid(), file=sys.stderr, flush=True)
time.sleep(float(os.environ.get("SUP_HANG_SECONDS", "60")))


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"should not serve"]
