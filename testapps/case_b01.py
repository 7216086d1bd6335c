"""B01: start_response called lazily, inside the first iteration."""


def app(environ, start_response):
    if environ["PATH_INFO"] == "/204":
        def gen():
            start_response("204 No Content", [])
            return
            yield  # pragma: no cover - makes gen a generator

        return gen()

    def gen():
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("X-Case", "b01")])
        yield b"gone"

    return gen()
