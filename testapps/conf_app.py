"""Configuration and deployment (tests/config_test.go, deploy_test.go):
the app reports what it was started with."""

import json
import os


def app(environ, start_response):
    body = json.dumps({
        "script_name": environ.get("SCRIPT_NAME", ""),
        "pid": os.getpid(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(os.getgroups()),
        "notify_socket": os.environ.get("NOTIFY_SOCKET"),
        "listen_fds": os.environ.get("LISTEN_FDS"),
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
