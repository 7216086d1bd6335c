"""Request body buffering (issue 29, tests/buffer_test.go).

POST /upload   reads wsgi.input (query mode=all: one read(); mode=lines:
               iteration; else read(8192) until empty) and answers
               "<length> <sha256 hex> <CONTENT_LENGTH or -> <wsgi.input_terminated>"
POST /stream   a streamed answer: "first\\n" once read(1024) returned,
               flushed before the rest of the body is read, then
               "<length> <sha256 hex>\\n"
GET  /pid      the worker's pid
GET  /         "ok"
"""

import hashlib
import os


def _digest(inp, mode):
    h, n = hashlib.sha256(), 0
    if mode == "mode=all":
        b = inp.read()
        h.update(b)
        return len(b), h.hexdigest()
    if mode == "mode=lines":
        for line in inp:
            h.update(line)
            n += len(line)
        return n, h.hexdigest()
    while True:
        b = inp.read(8192)
        if not b:
            return n, h.hexdigest()
        h.update(b)
        n += len(b)


def app(environ, start_response):
    path = environ["PATH_INFO"]
    inp = environ["wsgi.input"]
    if path == "/upload":
        n, digest = _digest(inp, environ["QUERY_STRING"])
        out = "%d %s %s %s" % (n, digest, environ.get("CONTENT_LENGTH") or "-", environ.get("wsgi.input_terminated"))
        out = out.encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
        return [out]
    if path == "/stream":
        def gen():
            h = hashlib.sha256()
            first = inp.read(1024)
            h.update(first)
            n = len(first)
            yield b"first\n"
            while True:
                b = inp.read(8192)
                if not b:
                    break
                h.update(b)
                n += len(b)
            yield ("%d %s\n" % (n, h.hexdigest())).encode()

        start_response("200 OK", [("Content-Type", "text/plain")])
        return gen()
    out = str(os.getpid()).encode() if path == "/pid" else b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
    return [out]
