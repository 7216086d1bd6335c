"""The WSGI app of the wsgi package's tests (wsgi_test.go): one route per
behaviour of the package, PEP 3333's words."""
import json
import threading


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/hello":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"Hello, World!"]
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [body]
    if path == "/environ":
        keys = {k: v for k, v in environ.items() if isinstance(v, (str, bool, int, tuple))}
        keys["thread"] = threading.current_thread().name
        keys["has_early_hints"] = callable(environ.get("wsgi.early_hints"))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(keys).encode()]
    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"imperative, ")
        return [b"then iterable"]
    if path == "/raise":
        raise RuntimeError("the app's own failure")
    if path == "/bad-header":
        start_response("200 OK", [("Bad Name", "x")])
        return [b"never"]
    if path == "/no-start":
        return [b"body before start_response"]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]
