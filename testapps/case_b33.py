"""B33: /stream yields b"tick\\n" every second for 60 s; /fast answers ok."""

import time


def app(environ, start_response):
    if environ["PATH_INFO"] == "/stream":
        def gen():
            for _ in range(60):
                yield b"tick\n"
                time.sleep(1)

        start_response("200 OK", [("Content-Type", "text/plain")])
        return gen()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
