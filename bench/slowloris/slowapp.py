"""App of the slowloris bench (case B40).

hello: answers 13 bytes without reading any body.
echo:  reads the whole request body first (as a form or upload view does),
       then answers with its length.
"""
BODY = b"Hello, World!"


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]


def echo(environ, start_response):
    n = 0
    inp = environ["wsgi.input"]
    while True:
        chunk = inp.read(65536)
        if not chunk:
            break
        n += len(chunk)
    body = b"read %d\n" % n if environ["REQUEST_METHOD"] == "POST" else BODY
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
