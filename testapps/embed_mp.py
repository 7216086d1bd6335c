"""Embedding pitfall: multiprocessing.Pool in a view (no os.fork of a Go process)."""

import multiprocessing
import os


def square(x):
    return x * x


def app(environ, start_response):
    with multiprocessing.Pool(2) as pool:
        result = pool.map(square, range(10))
    body = f"{sum(result)} {multiprocessing.get_start_method()} {os.getpid()}".encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
