"""The TLS facts an app is given (tests/tls_scope_test.go): the ASGI tls
extension (asgi) and the mod_ssl environ keys (app, WSGI), as JSON.
"tls" is absent (JSON null with "has_tls" false) on a plain connection."""

import json

SSL_KEYS = ("HTTPS", "SSL_PROTOCOL", "SSL_CIPHER", "SSL_SERVER_CERT", "SSL_CLIENT_VERIFY", "SSL_CLIENT_CERT",
            "SSL_CLIENT_S_DN", "SSL_CLIENT_I_DN", "SSL_CLIENT_M_SERIAL", "SSL_CLIENT_CERT_CHAIN_0")


def app(environ, start_response):
    out = {k: environ[k] for k in SSL_KEYS if k in environ}
    out["protocol"] = environ["SERVER_PROTOCOL"]
    out["scheme"] = environ["wsgi.url_scheme"]
    data = json.dumps(out).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    ext = scope.get("extensions") or {}
    tls = ext.get("tls")
    out = {"has_tls": "tls" in ext, "tls": tls, "scheme": scope["scheme"], "http_version": scope["http_version"]}
    if tls is not None:
        out["types"] = {k: type(v).__name__ for k, v in tls.items()}
    data = json.dumps(out).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})
