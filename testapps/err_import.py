"""Errors: a module that raises while it is imported."""

raise RuntimeError("err_import exploded at import time")


def app(environ, start_response):  # never reached
    start_response("200 OK", [])
    return [b""]
