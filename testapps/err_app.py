"""Errors: apps that break PEP 3333 in one way each, chosen by PATH_INFO.
Every failure must become a 500 (or a cut connection once the head is out),
with the traceback in the log and never in the body."""

SECRET = "err-secret-7f3a"  # appears in exception messages only


def _ok(start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


def _status(status):
    def view(environ, start_response):
        start_response(status, [("Content-Type", "text/plain")])
        return [b"should not be sent"]
    return view


def _header(name, value):
    def view(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain"), (name, value)])
        return [b"should not be sent"]
    return view


def _raise(environ, start_response):
    raise RuntimeError(f"boom {SECRET}")


def _raise_in_iter(environ, start_response):
    def gen():
        raise RuntimeError(f"boom in iter {SECRET}")
        yield b"never"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return gen()


def _no_start(environ, start_response):
    return [b"no start_response"]


def _no_start_gen(environ, start_response):
    def gen():
        yield b"no start_response"
    return gen()


def _str_list(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return ["a str, not bytes"]


def _str_gen(environ, start_response):
    def gen():
        yield "a str, not bytes"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return gen()


def _after_head(with_length):
    def view(environ, start_response):
        headers = [("Content-Type", "text/plain")]
        if with_length:
            headers.append(("Content-Length", "1000"))

        def gen():
            yield b"first block;"
            raise RuntimeError(f"after head {SECRET}")
        start_response("200 OK", headers)
        return gen()
    return view


ROUTES = {
    "/ok": lambda e, s: _ok(s),
    "/raise": _raise,
    "/raise-in-iter": _raise_in_iter,
    "/no-start": _no_start,
    "/no-start-gen": _no_start_gen,
    "/status-200": _status("200"),
    "/status-abc": _status("abc OK"),
    "/status-crlf": _status("200 OK\r\nX-Injected: 1"),
    "/status-lf": _status("200 OK\nX-Injected: 1"),
    "/status-bytes": _status(b"200 OK"),
    # RFC 9110 §15: a status code is 100-599
    "/status-600": _status("600 Beyond"),
    "/status-999": _status("999 Beyond"),
    "/status-42": _status("42 Short"),
    "/status-099": _status("099 Low"),
    "/header-cr": _header("X-Bad", "a\rX-Injected: 1"),
    "/header-lf": _header("X-Bad", "a\nX-Injected: 1"),
    "/header-crlf": _header("X-Bad", "a\r\nX-Injected: 1"),
    "/header-nul": _header("X-Bad", "a\x00b"),
    "/header-not-latin1": _header("X-Bad", "euro \u20ac"),
    "/header-name-not-latin1": _header("X-B\u20acd", "a"),
    "/header-name-crlf": _header("X-Bad\r\nX-Injected", "1"),
    "/header-name-space": _header("X Bad", "1"),
    "/str-list": _str_list,
    "/str-gen": _str_gen,
    "/after-head": _after_head(False),
    "/after-head-length": _after_head(True),
    "/short-body": lambda e, s: (s("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "10")]), [b"abc"])[1],
}


def app(environ, start_response):
    view = ROUTES.get(environ["PATH_INFO"])
    if view is None:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no such route"]
    return view(environ, start_response)
