"""Each request runs in a fresh contextvars.Context (DESIGN.md, WSGI).

/set?V    reports the var before setting it, sets it to V, and returns an
          iterable whose __next__ and close() report what they see
/get      reports the var
/closed   what the last close() saw
"""

import contextvars

var = contextvars.ContextVar("embed_ctx", default="unset")
last_close = "none"


class Body:
    def __init__(self, before):
        self.before = before
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        self.done = True
        return f"before={self.before} next={var.get()}".encode()

    def close(self):
        global last_close
        last_close = var.get()


def app(environ, start_response):
    path = environ["PATH_INFO"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    if path == "/set":
        before = var.get()
        var.set(environ["QUERY_STRING"])
        return Body(before)
    if path == "/closed":
        return [last_close.encode()]
    return [f"get={var.get()}".encode()]
