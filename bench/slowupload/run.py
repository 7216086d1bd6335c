#!/usr/bin/env python3
"""Slow uploads against a small WSGI pool (issue 29).

turnstile --threads 4 --queue-timeout Q serves testapps/upload_buffer.py.
CLIENTS sockets each send a POST head with Content-Length SIZE, the first
FIRST body bytes at once (past the old 64 KiB read-ahead), then RATE bytes
per second (in 10 pieces a second) for the whole run: just above
--min-body-rate (240), so the server never cuts them. Meanwhile one normal
GET / every 100 ms, each on a fresh connection in its own thread (open
loop). Counted: normal requests served (200), answered 503, other; the
latency of the served ones.

    python3 bench/slowupload/run.py --bin before=/path/a --bin after=/path/b

Writes bench/results/slowupload-<UTC stamp>.md (command, commits given with
--note, load average before and after).
"""

import argparse
import os
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(binpath, venv, port, threads, qtimeout, extra):
    argv = [binpath, "--venv", venv, "--app-dir", os.path.join(ROOT, "testapps"), "--host", "127.0.0.1",
            "--port", str(port), "--admin-bind", "off", "--threads", str(threads),
            "--queue-timeout", str(qtimeout)] + extra + ["upload_buffer:app"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, argv
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("server did not listen: " + " ".join(argv))


def uploader(port, size, first, rate, stop):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % size)
    s.sendall(b"u" * first)
    sent, piece = first, max(1, rate // 10)
    while not stop.is_set() and sent + piece < size:
        time.sleep(0.1)
        try:
            s.sendall(b"u" * piece)
        except OSError:
            return
        sent += piece
    s.close()


def normal(port, out, lock):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.settimeout(60)
        s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        s.close()
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "none"
    except OSError as e:
        status = type(e).__name__
    with lock:
        out.append((status, time.monotonic() - t0))


def run_one(label, binpath, args):
    port = free_port()
    p, argv = start(binpath, args.venv, port, args.threads, args.queue_timeout, args.extra)
    try:
        stop = threading.Event()
        ups = [threading.Thread(target=uploader, args=(port, args.size, args.first, args.rate, stop), daemon=True)
               for _ in range(args.clients)]
        for u in ups:
            u.start()
        time.sleep(1.0)
        res, lock, gets = [], threading.Lock(), []
        end = time.monotonic() + args.duration
        while time.monotonic() < end:
            g = threading.Thread(target=normal, args=(port, res, lock), daemon=True)
            g.start()
            gets.append(g)
            time.sleep(0.1)
        # The uploads keep going until every normal request is answered:
        # stopping them first would free the threads for the GETs still
        # queued.
        for g in gets:
            g.join(args.queue_timeout + 30)
        stop.set()
    finally:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
    served = [d for s, d in res if s == "200"]
    refused = sum(1 for s, _ in res if s == "503")
    other = len(res) - len(served) - refused
    q = lambda xs, f: (sorted(xs)[min(len(xs) - 1, int(f * len(xs)))] * 1000) if xs else float("nan")
    return {"label": label, "argv": argv, "total": len(res), "served": len(served), "503": refused, "other": other,
            "p50": q(served, 0.5), "p99": q(served, 0.99), "max": max(served) * 1000 if served else float("nan")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="label=path of a turnstile binary")
    ap.add_argument("--venv", default=os.path.join(ROOT, ".venv-3.11"))
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--queue-timeout", type=float, default=5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--size", type=int, default=200 << 10)
    ap.add_argument("--first", type=int, default=65 << 10)
    ap.add_argument("--rate", type=int, default=300)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--note", default="", help="a line for the report (e.g. the commits)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("extra", nargs="*", help="more turnstile flags (after --)")
    args = ap.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    load0 = open("/proc/loadavg").read().strip()
    rows = []
    for spec in args.bin:
        label, path = spec.split("=", 1)
        r = run_one(label, path, args)
        rows.append(r)
        print("%(label)s: %(served)d served, %(503)d 503, %(other)d other of %(total)d; p50 %(p50).1f ms p99 %(p99).1f ms" % r,
              flush=True)
    load1 = open("/proc/loadavg").read().strip()
    path = os.path.join(args.out, "slowupload-%s.md" % stamp)
    with open(path, "w") as f:
        f.write("# slowupload, %s\n\n" % stamp)
        f.write("Command: `python3 bench/slowupload/run.py %s`\n\n" % shlex.join(sys.argv[1:]))
        if args.note:
            f.write(args.note + "\n\n")
        f.write("Machine: 2 cores shared with other sessions; server and clients unpinned.\n")
        f.write("Load average before: %s; after: %s\n\n" % (load0, load1))
        f.write("%d clients each POST Content-Length %d: the first %d bytes at once, then %d B/s for the whole run; "
                "one normal GET / every 100 ms for %g s (open loop, fresh connection each). "
                "turnstile --threads %d --queue-timeout %g.\n\n"
                % (args.clients, args.size, args.first, args.rate, args.duration, args.threads, args.queue_timeout))
        f.write("| binary | normal requests | served (200) | 503 | other | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in rows:
            f.write("| %(label)s | %(total)d | %(served)d | %(503)d | %(other)d | %(p50).1f | %(p99).1f | %(max).1f |\n" % r)
        f.write("\nServer command lines:\n\n")
        for r in rows:
            f.write("- %s: `%s`\n" % (r["label"], " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in r["argv"])))
    print(path)


if __name__ == "__main__":
    main()
