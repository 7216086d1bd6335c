"""The bundled example: a WSGI app served by `make run`."""


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/":
        body = b"Hello, World!\n"
    else:
        body = ("You asked for %s\n" % path).encode("latin-1", "replace")
    start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
    return [body]
