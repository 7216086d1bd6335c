#!/usr/bin/env python3
"""Issue 29 battery, item 1: does --timeout take waiting for running?

--workers 2 --timeout 5 (4 threads each), 60 clients looping on a 1 s view
for 20 s: every request waits about 7 s in a queue but runs 1 s. Counts the
"running past --timeout" warnings and the worker replacements.

    python3 bench/withdraw/timeout.py --bin bin/turnstile-3.11 --venv .venv-3.11
"""

import argparse
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--clients", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    argv = [a.bin, "--app-dir", os.path.join(ROOT, "testapps"), "--host", "127.0.0.1", "--port", str(port),
            "--admin-bind", "off", "--venv", a.venv, "--workers", "2", "--timeout", "5", "--log-format", "json",
            "withdraw_app:app"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True).start()
    url = "http://127.0.0.1:%d" % port
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    stop = time.monotonic() + a.seconds
    ok = [0]

    def client():
        while time.monotonic() < stop:
            try:
                urllib.request.urlopen(url + "/sleep?1", timeout=60).read()
                ok[0] += 1
            except OSError:
                pass

    ts = [threading.Thread(target=client) for _ in range(a.clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    time.sleep(1)
    p.terminate()
    p.wait(30)
    warn = repl = 0
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("msg") == "request running past --timeout; replacing this worker gracefully":
            warn += 1
        if rec.get("msg") == "worker replaced":
            repl += 1
    print("| %s | %d | %g | %d | %d | %d |" % (a.label, a.clients, a.seconds, ok[0], warn, repl))


if __name__ == "__main__":
    main()
