#!/usr/bin/env python3
"""Issue 29: how long does a new connection wait while kept-alive clients
keep every thread busy, and where do a burst's connections land?

    python3 bench/gate_wait.py --bin bin/turnstile-3.11 [--label after]

Server: turnstile --workers 2 (--blocking-threads, --queue-timeout as
given) on testapps/sup_app.py. Load: wrk -c 32 on /sleep?1 (1 s views,
kept alive) for --duration s. From 3 s in, one probe a second: a fresh
connection's GET / (its wait, status and Retry-After), and the master's
admin /livez and /readyz. Before the load, a burst of 32 kept-alive
connections opened at once, each sending GET / and reading the worker pid
it names (the spread over the workers).

Python 3 stdlib plus wrk (apt). Prints a markdown section to stdout.
"""

import argparse
import collections
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_ready(admin, limit=60):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection(HOST, admin, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("server not ready")


def timed_get(port, path, timeout=60):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=timeout)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return time.monotonic() - t0, r.status, r.getheader("Retry-After"), body
    except OSError as e:
        return time.monotonic() - t0, 0, None, str(e).encode()


def burst(port, n):
    """n kept-alive connections opened at once from one thread, as wrk
    opens its connections: connect all, then send GET / on each, then read
    each answer's worker pid. Returns a Counter of pid -> connections."""
    socks = [socket.create_connection((HOST, port), timeout=30) for _ in range(n)]
    for s in socks:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    pids = collections.Counter()
    for s in socks:
        buf = b""
        while b"\r\n\r\n" not in buf or not buf.rstrip().split()[-1].isdigit():
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        pids[buf.rstrip().split()[-1].decode()] += 1
    time.sleep(0.2)
    for s in socks:
        s.close()
    time.sleep(0.3)
    return pids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--threads", default="4")
    ap.add_argument("--queue-timeout", default="30")
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--bursts", type=int, default=5)
    args = ap.parse_args()

    port, admin = free_port(), free_port()
    venv = os.path.join(ROOT, ".venv-3.11")
    cmd = [args.bin, "--app-dir", os.path.join(ROOT, "testapps"), "--host", HOST, "--port", str(port),
           "--admin-bind", f"{HOST}:{admin}", "--workers", "2", "--blocking-threads", args.threads,
           "--queue-timeout", args.queue_timeout, "--log-level", "warning"]
    if os.path.isdir(venv):
        cmd += ["--venv", venv]
    cmd.append("sup_app:app")
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(admin)
        spreads = [burst(port, args.conns) for _ in range(args.bursts)]
        wrk = subprocess.Popen(["wrk", "-t2", f"-c{args.conns}", f"-d{args.duration}s", "--timeout", "60s",
                                f"http://{HOST}:{port}/sleep?1"], stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        probes = []
        while wrk.poll() is None and len(probes) < args.duration - 5:
            live = timed_get(admin, "/livez", 10)
            ready = timed_get(admin, "/readyz", 10)
            fresh = timed_get(port, "/", 60)
            probes.append((fresh, live, ready))
            time.sleep(max(0, 1 - fresh[0]))
        out = wrk.communicate()[0]
    finally:
        srv.terminate()
        srv.wait(30)

    print(f"### {args.label} — `{' '.join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)}`\n")
    print("Burst spread (connections per worker pid, %d kept-alive connections at once):\n" % args.conns)
    for s in spreads:
        print("- " + ", ".join(f"{n}" for _, n in s.most_common()) + f" (min share {min(s.values()) / args.conns:.0%})"
              if len(s) > 1 else f"- {args.conns}, 0 (min share 0%)")
    waits = [p[0][0] for p in probes]
    print(f"\nFresh GET / under `wrk -t2 -c{args.conns} /sleep?1`: {len(probes)} probes, "
          f"wait median {statistics.median(waits):.2f} s, max {max(waits):.2f} s; "
          f"statuses {dict(collections.Counter(p[0][1] for p in probes))}; "
          f"Retry-After on every 503: {all(p[0][2] for p in probes if p[0][1] == 503)}")
    print(f"\nAdmin /livez max {max(p[1][0] for p in probes) * 1000:.1f} ms, "
          f"/readyz max {max(p[2][0] for p in probes) * 1000:.1f} ms (statuses "
          f"{dict(collections.Counter(p[2][1] for p in probes))})\n")
    print("Probe waits (s): " + " ".join(f"{w:.2f}" for w in waits) + "\n")
    print("wrk:\n\n```\n" + out.strip() + "\n```\n")


if __name__ == "__main__":
    main()
