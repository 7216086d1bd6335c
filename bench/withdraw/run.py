#!/usr/bin/env python3
"""Issue 29 battery: recovery after a burst of abandoned WSGI requests.

One worker, one Python thread (--threads 1). A request holds the thread on
/sleep?HOLD; meanwhile N clients each send GET /work?COST (which would keep
the thread COST seconds) and close their connection after GIVEUP seconds,
while still queued. Then a fresh GET / is sent. Recovery is the time from
the end of the held request to the fresh request's answer: with the
abandoned requests run anyway it is about N x COST, with them withdrawn the
target is under 100 ms.

    python3 bench/withdraw/run.py --bin bin/turnstile-3.11 --venv .venv-3.11 \
        --clients 20,2000

stdlib only. Prints one markdown table row per arm.
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(port, path, timeout=300):
    t0 = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        body = r.read()
    return time.monotonic(), body, time.monotonic() - t0


def start(binpath, venv, port, admin, log):
    argv = [binpath, "--app-dir", os.path.join(ROOT, "testapps"), "--host", "127.0.0.1",
            "--port", str(port), "--admin-bind", "127.0.0.1:%d" % admin, "--venv", venv,
            "--workers", "1", "--threads", "1", "--queue-size", "4096", "--backlog", "4096",
            "--log-format", "json", "withdraw_app:app"]
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get(port, "/", timeout=1)
            return p, argv
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit("turnstile did not start")


def withdrawn(admin):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r"^turnstile_requests_withdrawn_total(?:\{[^}]*\})? (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else None


def arm(binpath, venv, n, hold, cost, giveup, logpath):
    port, admin = free_port(), free_port()
    with open(logpath, "w") as log:
        p, argv = start(binpath, venv, port, admin, log)
        try:
            held = {}
            th = threading.Thread(target=lambda: held.update(t=get(port, "/sleep?%g" % hold)[0]))
            t0 = time.monotonic()
            th.start()
            time.sleep(0.2)
            socks = []
            req = ("GET /work?%g HTTP/1.1\r\nHost: x\r\n\r\n" % cost).encode()
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(req)
                socks.append(s)
            sent = time.monotonic() - t0
            time.sleep(max(0.0, giveup - (time.monotonic() - t0 - 0.2)))
            for s in socks:
                s.close()
            time.sleep(0.2)
            fresh_at = time.monotonic()
            done, _, _ = get(port, "/")
            th.join()
            recovery = done - held["t"]
            ran = get(port, "/ran")[1].decode()
            w = withdrawn(admin)
            return dict(n=n, sent=sent, fresh_wait=done - fresh_at, recovery=recovery, ran=ran, withdrawn=w, argv=argv)
        finally:
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--clients", default="20,2000")
    ap.add_argument("--hold", type=float, default=3.0, help="seconds the first request holds the thread")
    ap.add_argument("--giveup", type=float, default=1.5, help="seconds after the hold began when the clients close")
    ap.add_argument("--cost", default="20:0.25,2000:0.01", help="N:seconds of /work per abandoned request")
    ap.add_argument("--label", default="")
    ap.add_argument("--logdir", default=os.path.join(ROOT, "bench", "work"))
    a = ap.parse_args()
    os.makedirs(a.logdir, exist_ok=True)
    costs = dict((int(k), float(v)) for k, v in (c.split(":") for c in a.cost.split(",")))
    print("| build | clients | /work cost (s) | requests started of theirs | withdrawn (metric) | fresh request waited (s) | recovery after the held request ended (ms) |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in a.clients.split(",")):
        cost = costs.get(n, 0.01)
        r = arm(a.bin, a.venv, n, a.hold, cost, a.giveup, os.path.join(a.logdir, "withdraw-%s-%d.log" % (a.label or "run", n)))
        print("| %s | %d | %g | %s | %s | %.3f | %.1f |" % (a.label, n, cost, r["ran"], "-" if r["withdrawn"] is None else r["withdrawn"],
                                                          r["fresh_wait"], r["recovery"] * 1000), flush=True)


if __name__ == "__main__":
    main()
