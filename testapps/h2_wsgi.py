"""WSGI app for the TLS and HTTP/2 tests (tests/http2_test.go, tls_test.go).

/            the request as JSON: SERVER_PROTOCOL, wsgi.url_scheme,
             HTTP_HOST, SERVER_NAME, the HTTP_* keys, the body length and
             its sha256
/stream      a streaming response (no Content-Length): one chunk every
             50 ms until the client leaves; the iterable's close() counts
             in "closed" (a client gone on HTTP/2 must end it as on HTTP/1)
/big?n=N     N bytes of "x" with a Content-Length
/slow        sleeps 2 s, then answers "done" (graceful stop)
/rapid       counts its calls in "rapid" (a stream reset before its app
             started must never start it: tests/http2_test.go
             TestHTTP2_RapidReset), sleeps 10 ms, answers "ok"
/stats       {"closed": N, "rapid": N}
"""

import hashlib
import json
import time

stats = {"closed": 0, "rapid": 0}


class Stream:
    def __init__(self):
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.n:
            time.sleep(0.05)
        self.n += 1
        if self.n > 2000:
            raise StopIteration
        return b"chunk %d\n" % self.n

    def close(self):
        stats["closed"] += 1


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Stream()
    if path == "/rapid":
        stats["rapid"] += 1
        time.sleep(0.01)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    if path == "/slow":
        time.sleep(2)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
        return [b"done"]
    if path == "/stats":
        out = json.dumps(stats).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [out]
    if path == "/big":
        n = int(environ["QUERY_STRING"].partition("=")[2] or "0")
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(n))])
        return [b"x" * n]
    body = environ["wsgi.input"].read()
    out = json.dumps({
        "protocol": environ["SERVER_PROTOCOL"],
        "scheme": environ["wsgi.url_scheme"],
        "host": environ.get("HTTP_HOST"),
        "server_name": environ["SERVER_NAME"],
        "method": environ["REQUEST_METHOD"],
        "path": path,
        "query": environ["QUERY_STRING"],
        "headers": {k: v for k, v in environ.items() if k.startswith("HTTP_")},
        "content_length": environ.get("CONTENT_LENGTH", ""),
        "body_len": len(body),
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out))),
                              ("Connection", "keep-alive"), ("Keep-Alive", "timeout=5"), ("X-App", "h2")])
    return [out]
