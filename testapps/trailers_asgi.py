"""ASGI app for the response trailer tests (http.response.trailers).

/trailers  "trailers": True, body in two messages, then the trailers in
           two messages (more_trailers)
/whole     "trailers": True, the whole body in one message, then trailers
/cl        "trailers": True with a Content-Length: the trailers are dropped
/unasked   trailers without "trailers": True: ignored
/hop       trailers with connection-specific fields (te, upgrade,
           proxy-connection) among them: dropped over HTTP/2 and HTTP/3
"""


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    has = b"1" if "http.response.trailers" in scope.get("extensions", {}) else b"0"
    headers = [(b"content-type", b"text/plain"), (b"trailer", b"x-checksum, x-more")]
    if path == "/cl":
        headers.append((b"content-length", b"3"))
    await send({"type": "http.response.start", "status": 200, "headers": headers,
                "trailers": path != "/unasked"})
    if path == "/trailers":
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        await send({"type": "http.response.body", "body": b"b" + has})
        await send({"type": "http.response.trailers", "headers": [(b"x-checksum", b"abc")], "more_trailers": True})
        await send({"type": "http.response.trailers", "headers": [(b"x-more", b"1")], "more_trailers": False})
        return
    if path == "/hop":
        await send({"type": "http.response.body", "body": b"ab" + has})
        await send({"type": "http.response.trailers", "headers": [
            (b"te", b"gzip"), (b"upgrade", b"x"), (b"proxy-connection", b"y"), (b"x-checksum", b"abc")]})
        return
    await send({"type": "http.response.body", "body": b"ab" + has})
    await send({"type": "http.response.trailers", "headers": [(b"x-checksum", b"abc"), (b"x-more", b"1")]})
