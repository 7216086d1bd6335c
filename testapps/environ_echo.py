"""Echoes the environ keys a server derives from the request
(tests/environ_test.go), and answers with two Content-Length headers on
/two-lengths."""

import json

KEYS = ("CONTENT_LENGTH", "HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "PATH_INFO", "QUERY_STRING", "REMOTE_ADDR", "REMOTE_PORT")


def app(environ, start_response):
    if environ["PATH_INFO"] == "/two-lengths":
        start_response("200 OK", [("Content-Length", "3"), ("Content-Length", "5")])
        return [b"123"]
    n = int(environ.get("CONTENT_LENGTH") or 0)  # what Django does with it
    body = environ["wsgi.input"].read(n)
    out = {k: environ.get(k) for k in KEYS}
    out["body"] = body.decode("latin-1")
    data = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]
