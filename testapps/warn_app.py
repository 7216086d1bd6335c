"""Warnings and stderr (tests/errors_test.go, TestErrors_WarningLevel).

/warn     warnings.warn(UserWarning): one WARNING record
/stderr   a line printed to sys.stderr: an ERROR record, as before
"""

import sys
import warnings


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/warn":
        warnings.warn("turnstile-warn-7c1 from the app", UserWarning)
    elif path == "/stderr":
        print("turnstile-stderr-7c1 from the app", file=sys.stderr)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
