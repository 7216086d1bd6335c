"""Echo what the server says about the client, for tests/proxy_test.go.

wsgi_app: the environ keys proxy headers and TLS change, as JSON.
asgi_app: the same from the scope (HTTP and WebSocket: a WebSocket is
accepted, sent the JSON as one text message, and closed).

"interned" says whether the scheme string is the interned one (the server
interns "http", "https", "ws" and "wss" rather than making a new string per
request).
"""

import json
import sys

ENVIRON_KEYS = (
    "REMOTE_ADDR", "REMOTE_PORT", "wsgi.url_scheme", "HTTP_HOST",
    "SERVER_NAME", "SERVER_PORT", "SCRIPT_NAME", "PATH_INFO",
    "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PREFIX",
)


def wsgi_app(environ, start_response):
    out = {k: environ.get(k) for k in ENVIRON_KEYS}
    scheme = environ["wsgi.url_scheme"]
    out["interned"] = scheme is sys.intern(scheme)
    body = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _scope(scope):
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    return {
        "type": scope["type"],
        "scheme": scope["scheme"],
        "interned": scope["scheme"] is sys.intern(scope["scheme"]),
        "client": list(scope["client"]) if scope.get("client") else None,
        "server": list(scope["server"]) if scope.get("server") else None,
        "host": headers.get("host"),
        "root_path": scope.get("root_path"),
        "path": scope.get("path"),
    }


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = json.dumps(_scope(scope))
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": body})
        await send({"type": "websocket.close", "code": 1000})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body.encode()})
