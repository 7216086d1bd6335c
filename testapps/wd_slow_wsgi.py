"""WSGI app with a slow view for the slow-request sampler."""

import time


def slow_view():
    time.sleep(2.5)


def app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        slow_view()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"done"]
