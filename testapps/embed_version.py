"""Embedding pitfall: which CPython runs the app. Answers JSON with
sys.version, sys.executable and every libpython mapped into the process."""

import json
import sys


def app(environ, start_response):
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "libpython" in parts[5]:
                libs.add(parts[5].strip())
    body = json.dumps({"version": sys.version, "executable": sys.executable,
                       "libpython": sorted(libs)}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
