"""Lifecycle: a slow view and views that write to stdout, logging and
wsgi.errors.

/slow?S   sleeps S seconds (default 2), answers "done"
/print    print(MARK)
/logging  logging.warning(MARK)
/errors   environ["wsgi.errors"].write(MARK + "\\n")
MARK is the query string.
"""

import logging
import time


def app(environ, start_response):
    path, mark = environ["PATH_INFO"], environ["QUERY_STRING"]
    if path == "/slow":
        time.sleep(float(mark or "2"))
        body = b"done"
    elif path == "/print":
        print(mark)
        body = b"printed"
    elif path == "/logging":
        logging.warning(mark)
        body = b"logged"
    elif path == "/errors":
        environ["wsgi.errors"].write(mark + "\n")
        environ["wsgi.errors"].flush()
        body = b"written"
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
