"""Embedding pitfall: a large upload read from wsgi.input in 64 KiB reads.

POST /      waits WAIT seconds (query string, default 0) before its first
            read, so a server that reads ahead of the app would buffer, then
            reads in 64 KiB blocks with a short pause every 1 MiB; answers
            "<bytes read> <crc32 as 8 hex digits>"
GET /pid    the worker's pid
"""

import os
import time
import zlib


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    if environ["PATH_INFO"] == "/pid":
        return [str(os.getpid()).encode()]
    time.sleep(float(environ["QUERY_STRING"] or "0"))
    inp = environ["wsgi.input"]
    total, crc, n = 0, 0, 0
    while True:
        block = inp.read(65536)
        if not block:
            break
        total += len(block)
        crc = zlib.crc32(block, crc)
        n += 1
        if n % 16 == 0:
            time.sleep(0.001)
    return [f"{total} {crc:08x}".encode()]
