"""B04: wsgi.input on a chunked body with small chunks.

/readline  readline() until b"", then read(1024) once more
/read      a single read(65536)
Both answer "<lines> <total bytes>".
"""


def app(environ, start_response):
    inp = environ["wsgi.input"]
    if environ["PATH_INFO"] == "/read":
        data = inp.read(65536)
        lines, total = data.count(b"\n"), len(data)
    else:
        lines = total = 0
        while True:
            line = inp.readline()
            if not line:
                break
            lines += 1
            total += len(line)
        total += len(inp.read(1024))
    body = f"{lines} {total}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                              ("X-Input-Terminated", str(environ.get("wsgi.input_terminated")))])
    return [body]
