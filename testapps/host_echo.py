"""The host a request names, as each interface shows it (tests/host_test.go).

wsgi_app answers "HTTP_HOST SERVER_NAME SERVER_PORT"; asgi_app answers
"host-field[,host-field...] server-host server-port": every "host" entry of
scope["headers"], then scope["server"]. Both end in a newline.
"""


def wsgi_app(environ, start_response):
    body = "%s %s %s\n" % (environ.get("HTTP_HOST", "-"), environ["SERVER_NAME"], environ["SERVER_PORT"])
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body.encode("latin-1")]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]
    host, port = scope["server"] or ("-", "-")
    body = "%s %s %s\n" % (",".join(hosts) or "-", host, port)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body.encode("latin-1")})
