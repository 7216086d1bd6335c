"""WSGI JSON: json.dumps of a small dict on every request."""

import json


def app(environ, start_response):
    body = json.dumps(
        {
            "message": "Hello, World!",
            "path": environ.get("PATH_INFO", "/"),
            "items": [1, 2, 3],
            "ok": True,
        }
    ).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]
