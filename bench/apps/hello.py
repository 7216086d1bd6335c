"""WSGI hello: the smallest app, so the server's own cost dominates."""

BODY = b"Hello, World!"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def app(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]
