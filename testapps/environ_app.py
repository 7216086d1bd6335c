"""What a worker's environment shows the app (tests/hardening_test.go):
os.environ, and the environment a subprocess started by the app gets."""

import json
import os
import subprocess


def app(environ, start_response):
    child = subprocess.run(["env"], capture_output=True, check=True).stdout.decode()
    body = json.dumps({"environ": dict(os.environ), "child": child}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
