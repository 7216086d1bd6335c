"""An echo app wrapped in wsgiref.validate.validator (tests/validator_test.go).

Any PEP 3333 violation the validator sees in the server (environ, wsgi.input,
start_response, iteration, close) is an AssertionError, and every
WSGIWarning is turned into an error too: either one is a 500 and a
traceback in the server log.

The app reads the body through the ?read= method (validator rules: read()
needs a size, readline() takes at most one argument) and answers, as JSON,
the request facts and the body's length and sha256. ?resp= picks how the
body goes back: "list" (one block, Content-Length), "gen" (several blocks,
no Content-Length) or "write" (the write() callable, then an empty list).
"""

import hashlib
import json
import warnings
import wsgiref.validate
from urllib.parse import parse_qs

warnings.simplefilter("error", wsgiref.validate.WSGIWarning)


def _read_body(inp, how):
    if how == "chunks":
        while True:
            b = inp.read(65536)
            if not b:
                return
            yield b
    elif how == "small":
        while True:
            b = inp.read(1000)
            if not b:
                return
            yield b
    elif how == "lines":
        while True:
            line = inp.readline()
            if not line:
                return
            yield line
    elif how == "iter":
        yield from inp
    elif how == "readlines":
        yield from inp.readlines()
    else:
        raise ValueError(f"unknown read mode {how!r}")


def echo(environ, start_response):
    q = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    h = hashlib.sha256()
    n = 0
    pieces = 0
    for b in _read_body(environ["wsgi.input"], q.get("read", "chunks")):
        h.update(b)
        n += len(b)
        pieces += 1
    facts = {
        "method": environ["REQUEST_METHOD"],
        "path": environ.get("PATH_INFO", ""),
        "query": environ.get("QUERY_STRING", ""),
        "content_length": environ.get("CONTENT_LENGTH", ""),
        "input_terminated": environ.get("wsgi.input_terminated", False),
        "length": n,
        "sha256": h.hexdigest(),
        "lines": pieces if q.get("read") in ("lines", "iter", "readlines") else None,
    }
    out = json.dumps(facts, sort_keys=True).encode() + b"\n"
    resp = q.get("resp", "list")
    headers = [("Content-Type", "application/json")]
    if resp == "list":
        start_response("200 OK", headers + [("Content-Length", str(len(out)))])
        return [out]
    if resp == "gen":
        start_response("200 OK", headers)
        return (out[i:i + 16] for i in range(0, len(out), 16))
    if resp == "write":
        write = start_response("200 OK", headers + [("Content-Length", str(len(out)))])
        write(out)
        return []
    raise ValueError(f"unknown resp mode {resp!r}")


application = wsgiref.validate.validator(echo)
