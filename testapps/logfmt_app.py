"""WSGI app for the access log format and --log-config tests
(tests/logfmt_test.go): fixed responses with a response header of the
app's, and a record of its own logger per request."""

import logging

log = logging.getLogger("logfmt.app")


def app(environ, start_response):
    path = environ["PATH_INFO"]
    log.warning("handled %s", path)
    if path == "/missing":
        body = b"not here\n"
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/stream":
        # No Content-Length: chunked on HTTP/1.1.
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Resp", "streamed")])
        return [b"one\n", b"two\n"]
    body = b"hello, logs\n"
    start_response(
        "200 OK",
        [("Content-Type", "text/plain"), ("Content-Length", str(len(body))), ("X-Resp", 'v"1'), ("X-Resp", "v2")],
    )
    return [body]
