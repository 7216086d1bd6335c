#!/usr/bin/env python3
"""Requests lost when a worker is replaced (issue 29: "the last response
announces the close").

    python3 bench/drain/drain.py --bin before=/tmp/old/turnstile --bin after=bin/turnstile-3.11 \\
        --bin 'no-window=bin/turnstile-3.11 --timeout-keep-alive-drain 0' --venv .venv-3.11 --reps 3

turnstile runs --workers 2 --max-requests 5 on bench/apps/hello.py, so a
worker is replaced every few requests. Each of --clients clients (1) sends --requests POSTs
(a small body; a POST is never retried by a client) on a kept-alive
connection (http.client), pausing --pause seconds between requests. A
request is lost when the connection fails under it (EOF before a
response, a reset, a broken pipe): the client counts it, opens a new
connection and goes on with the next request. A response with
"Connection: close" makes http.client open a new connection for the next
request: that is no loss.

Before the fix a replaced worker answered its last requests without
"Connection: close" and closed its idle kept-alive connections when it
stopped: the client's next POST on one met EOF. After it, those responses
announce the close and idle connections get --timeout-keep-alive-drain.

Python 3 stdlib only. Writes bench/results/drain-<UTC>.md (counts, the
command, the commit, the load average) unless --no-record.
"""

import argparse
import datetime
import http.client
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
APPS = os.path.join(BENCH, "apps")
HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start(binary, venv, port, extra, log):
    argv = [binary, "--venv", venv, "--app-dir", APPS, "--host", HOST, "--port", str(port),
            "--workers", "2", "--max-requests", "5", "--admin-bind", "off", "--log-level", "warning"]
    argv += extra + ["hello:app"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    p = subprocess.Popen(argv, cwd=APPS, env=env, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise SystemExit("server exited: " + shlex.join(argv))
        try:
            with socket.create_connection((HOST, port), 1):
                return p, argv
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not listen: " + shlex.join(argv))


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    except ProcessLookupError:
        pass


def run_client(port, n, pause):
    """Returns (lost, errors by kind, responses with Connection: close)."""
    lost, kinds, closes = 0, {}, 0
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    body = b"x" * 64
    for _ in range(n):
        try:
            c.request("POST", "/", body=body, headers={"Content-Type": "application/octet-stream"})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                raise OSError("status %d" % r.status)
            if (r.getheader("Connection") or "").lower() == "close":
                closes += 1
        except (OSError, http.client.HTTPException) as e:
            lost += 1
            kind = type(e).__name__
            kinds[kind] = kinds.get(kind, 0) + 1
            c.close()
            c = http.client.HTTPConnection(HOST, port, timeout=10)
        time.sleep(pause)
    c.close()
    return lost, kinds, closes


def run_clients(port, clients, n, pause):
    """run_client in clients threads, n requests each; the sums."""
    if clients == 1:
        return run_client(port, n, pause)
    results = []
    ts = [threading.Thread(target=lambda: results.append(run_client(port, n, pause))) for _ in range(clients)]
    for t in ts:
        t.start()
        time.sleep(pause / clients)  # spread the clients over the pause
    for t in ts:
        t.join()
    lost, kinds, closes = 0, {}, 0
    for l, k, c in results:
        lost, closes = lost + l, closes + c
        for kind, m in k.items():
            kinds[kind] = kinds.get(kind, 0) + m
    return lost, kinds, closes


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, metavar="LABEL=PATH",
                    help="a turnstile binary to measure, possibly followed by its own flags (repeatable)")
    ap.add_argument("--venv", required=True, help="virtualenv of the binaries' CPython")
    ap.add_argument("--requests", type=int, default=100, help="requests per client")
    ap.add_argument("--clients", type=int, default=1, help="clients, each on its own connection")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between a client's requests")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--extra", default="", help="more turnstile flags, e.g. '--timeout-keep-alive-drain 0'")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    a.venv = os.path.abspath(a.venv)

    os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    logpath = os.path.join("/tmp", "drain-%s.log" % stamp)
    load_before = open("/proc/loadavg").read().strip()
    rows, argvs = [], {}
    with open(logpath, "ab") as log:
        for spec in a.bin:
            label, _, rest = spec.partition("=")
            words = shlex.split(rest)
            path, own = os.path.abspath(words[0]), words[1:]
            for rep in range(a.reps):
                port = free_port()
                p, argv = start(path, a.venv, port, own + shlex.split(a.extra), log)
                argvs[label] = argv
                try:
                    t0 = time.monotonic()
                    lost, kinds, closes = run_clients(port, a.clients, a.requests, a.pause)
                    took = time.monotonic() - t0
                finally:
                    stop(p)
                rows.append((label, rep + 1, lost, kinds, closes, took))
                print("%-8s rep %d: %d of %d lost %s, %d responses with Connection: close, %.1f s" %
                      (label, rep + 1, lost, a.requests * a.clients, kinds or "", closes, took), flush=True)
    load_after = open("/proc/loadavg").read().strip()
    if a.no_record:
        return
    cmd = "python3 bench/drain/drain.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    out = os.path.join(BENCH, "results", "drain-%s.md" % stamp)
    with open(out, "w") as f:
        f.write("# drain, %s\n\n" % stamp)
        f.write("Command: `%s`\n\n" % cmd)
        f.write("Commit: `%s` (%s)%s\n\n" % (git("rev-parse", "HEAD"), git("log", "-1", "--format=%s")[:100],
                                             ", uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else ""))
        f.write("Machine: %s, %d cores shared with other engineers. Load average before: %s; after: %s\n\n" %
                (platform_cpu(), os.cpu_count() or 0, load_before, load_after))
        f.write("%d client(s), each %d POSTs on its own kept-alive http.client connection, %.3g s apart; "
                "a lost request is one whose connection failed under it (no retry).\n\n" % (a.clients, a.requests, a.pause))
        for label, argv in argvs.items():
            f.write("- %s: `%s`\n" % (label, shlex.join(argv)))
        f.write("\n| binary | rep | lost | errors | responses with `Connection: close` | seconds |\n|---|---|---|---|---|---|\n")
        for label, rep, lost, kinds, closes, took in rows:
            f.write("| %s | %d | %d of %d | %s | %d | %.1f |\n" % (label, rep, lost, a.requests * a.clients,
                    ", ".join("%s %d" % kv for kv in sorted(kinds.items())) or "-", closes, took))
    print("wrote", os.path.relpath(out, ROOT))


def platform_cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
