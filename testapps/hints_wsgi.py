"""WSGI app for the 103 Early Hints tests (environ["wsgi.early_hints"], as
gunicorn offers it).

/hints   early hints with two Link headers, then 200 "ok"
/hints-404  early hints, then 404 with X-Final: yes
/late    start_response and a first block, then early hints (ignored)
/bad     early hints with CR LF in a value: ValueError, so 500
"""

HINTS = [("Link", "</style.css>; rel=preload; as=style"), ("Link", "</app.js>; rel=preload; as=script")]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    hints = environ.get("wsgi.early_hints")
    has = b"1" if callable(hints) else b"0"
    if path == "/hints":
        hints(HINTS)
    elif path == "/hints-404":
        hints(HINTS)
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("X-Final", "yes")])
        return [b"ok extension=" + has]
    elif path == "/bad":
        hints([("Link", "</x>\r\nSet-Cookie: a=b")])
    elif path == "/late":
        def gen():
            yield b"ok "
            hints(HINTS)
            yield b"extension=" + has
        start_response("200 OK", [("Content-Type", "text/plain")])
        return gen()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok extension=" + has]
