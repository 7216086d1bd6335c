#!/usr/bin/env python3
"""Slowloris against turnstile (case B40, issue 3).

turnstile (one worker, 4 threads) runs with short timeouts
(--timeout-request-header 5s --timeout-body 5s by default). From core 0:

  --idle     500 sockets that connect and send nothing
  --headers  200 sockets that send "GET / HTTP/1.1\\r\\nHost: a\\r\\n" and then
             one header byte every --trickle s (default 1 s)
  --bodies   50 sockets that send a full POST head with Content-Length:
             1000000 and then 10 bytes every second
  normal     one GET / on a fresh connection every 100 ms (a separate
             process, as curl would be), for the whole run

Each slow socket is watched until it reads EOF, a reset or a response (408
or other); its lifetime is measured from connect. Checks (docs/cases.md, B40):
every slow socket closed within its timeout + 2 s; normal p99 < 200 ms and
no normal request failing; the worker's fd count (/proc/<worker>/fd, the
worker = the master's child) back to its baseline after the attack.

--app echo (default) reads the request body in the app, as an upload view
does; --app hello never reads it.
"""

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def normal_client(port, duration, interval):
    """Child process: one GET per interval on a fresh connection; prints JSON."""
    lat, errs = [], []
    t_end = time.monotonic() + duration
    nxt = time.monotonic()
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        try:
            s = socket.create_connection((T.HOST, port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                c = s.recv(65536)
                if not c:
                    break
                data += c
            s.close()
            if data.startswith(b"HTTP/1.1 200"):
                lat.append((time.monotonic() - t0) * 1e3)
            else:
                errs.append(data[:40].decode(errors="replace"))
        except OSError as e:
            errs.append(repr(e))
            lat.append((time.monotonic() - t0) * 1e3)
        nxt += interval
        time.sleep(max(0.0, nxt - time.monotonic()))
    print(json.dumps(dict(lat=lat, errs=errs, n=len(lat) + sum(1 for e in errs if not e.startswith(("Connection", "timeout", "Timeout"))))))


async def slow_sock(kind, port, a, res):
    t0 = time.monotonic()
    try:
        r, w = await asyncio.open_connection(T.HOST, port)
    except OSError as e:
        res.append(dict(kind=kind, life=float("nan"), how="connect failed %r" % e))
        return
    how = "?"

    async def trickle():
        try:
            if kind == "headers":
                w.write(b"GET / HTTP/1.1\r\nHost: a\r\n")
                await w.drain()
                for b in b"X-Slow: " + b"a" * 100000:
                    await asyncio.sleep(a.trickle)
                    w.write(bytes([b]))
                    await w.drain()
            elif kind == "bodies":
                w.write(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n"
                        b"Content-Length: 1000000\r\n\r\n")
                await w.drain()
                while True:
                    await asyncio.sleep(1.0)
                    w.write(b"x" * 10)
                    await w.drain()
            else:
                await asyncio.sleep(3600)
        except (OSError, ConnectionError):
            pass

    tt = asyncio.ensure_future(trickle())
    try:
        data = await asyncio.wait_for(r.read(200), timeout=a.watch)
        if not data:
            how = "EOF"
        else:
            how = data.split(b"\r\n", 1)[0].decode(errors="replace")
            # a response: wait for the close after it (or give up at the watch limit)
            try:
                while await asyncio.wait_for(r.read(65536), timeout=a.watch):
                    pass
                how += " then EOF"
            except asyncio.TimeoutError:
                how += " (left open)"
    except asyncio.TimeoutError:
        how = "still open at %ds" % a.watch
    except (ConnectionError, OSError) as e:
        how = "reset (%s)" % type(e).__name__
    life = time.monotonic() - t0
    tt.cancel()
    w.close()
    res.append(dict(kind=kind, life=life, how=how))


async def attack(port, a, res):
    tasks = []
    for kind, n in (("idle", a.idle), ("headers", a.headers), ("bodies", a.bodies)):
        for _ in range(n):
            tasks.append(asyncio.ensure_future(slow_sock(kind, port, a, res)))
    await asyncio.gather(*tasks)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--app", default="echo", choices=("echo", "hello"))
    p.add_argument("--idle", type=int, default=500)
    p.add_argument("--headers", type=int, default=200)
    p.add_argument("--bodies", type=int, default=50)
    p.add_argument("--trickle", type=float, default=1.0)
    p.add_argument("--header-timeout", default="5s")
    p.add_argument("--body-timeout", default="5s")
    p.add_argument("--watch", type=int, default=20, help="give up on a slow socket after this many s")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    p.add_argument("--venv", default=T.default_venv())
    p.add_argument("--normal-child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.normal_child:
        normal_client(int(a.normal_child[0]), float(a.normal_child[1]), float(a.normal_child[2]))
        return
    os.makedirs(a.out, exist_ok=True)
    st = T.stamp()
    base = os.path.join(a.out, "slowloris-%s-%s" % (a.app, st))
    tbin, tinfo = T.snapshot_turnstile()
    load_before, started = T.R.loadavg(), T.R.utcnow()
    hto, bto = float(a.header_timeout.rstrip("s")), float(a.body_timeout.rstrip("s"))
    log = os.path.join(T.WORK, "logs", "slowloris-%s.log" % st)
    srv, port, _ = T.make_server("turnstile", tbin, a.venv, HERE, "slowapp:" + a.app, a.threads, log, extra=(
        "--timeout-request-header", a.header_timeout, "--timeout-body", a.body_timeout))
    lines = []
    try:
        err = srv.wait_ready(port, "/")
        if err:
            sys.exit("turnstile failed to start: %s" % err)
        time.sleep(0.5)
        kids = srv.children()
        worker = kids[0] if kids else srv.proc.pid
        base_fd = fds(worker)
        cmd = T.portless(srv.cmdline(), (port, "PORT"))
        dur = a.watch + 3
        normal = subprocess.Popen(["taskset", "-c", str(T.CLIENT_CORE), sys.executable, os.path.abspath(__file__),
                                   "--normal-child", str(port), str(dur), "0.1"], stdout=subprocess.PIPE)
        time.sleep(0.5)
        res = []
        t0 = time.monotonic()
        fd_peak = [0]

        async def watch_fds():
            while True:
                fd_peak[0] = max(fd_peak[0], fds(worker))
                await asyncio.sleep(0.25)

        async def go():
            wt = asyncio.ensure_future(watch_fds())
            await attack(port, a, res)
            wt.cancel()
        os.sched_setaffinity(0, {T.CLIENT_CORE})
        asyncio.run(go())
        attack_s = time.monotonic() - t0
        nres = json.loads(normal.communicate(timeout=dur + 30)[0])
        # fd count back to baseline? Poll for up to 5 s after the last slow socket.
        fd_after, t_fd = fds(worker), time.monotonic()
        while fd_after > base_fd and time.monotonic() - t_fd < 5:
            time.sleep(0.2)
            fd_after = fds(worker)
        alive = srv.proc.poll() is None
    finally:
        srv.stop()

    verdicts = []
    lines.append("Slowloris (B40) against turnstile, app slowapp:%s, %s; %d idle + %d trickling headers "
                 "(1 byte / %.1fs) + %d trickling bodies (10 B/s of a 1000000-byte Content-Length); "
                 "normal GET every 100 ms on a fresh connection." % (
                     a.app, "--timeout-request-header %s --timeout-body %s" % (a.header_timeout, a.body_timeout),
                     a.idle, a.headers, a.trickle, a.bodies))
    lines.append("")
    lines.append("| sockets | n | closed by | lifetime p50 s | max s | limit s | over limit |")
    lines.append("|---|---:|---|---:|---:|---:|---:|")
    for kind, limit in (("idle", hto + 2), ("headers", hto + 2), ("bodies", bto + 2)):
        sel = [r for r in res if r["kind"] == kind]
        if not sel:
            continue
        lives = sorted(r["life"] for r in sel)
        hows = {}
        for r in sel:
            h = r["how"]
            hows[h] = hows.get(h, 0) + 1
        over = sum(1 for r in sel if not (r["life"] <= limit) or r["how"].startswith("still open"))
        lines.append("| %s | %d | %s | %.2f | %.2f | %.0f | %d |" % (
            kind, len(sel), "; ".join("%s ×%d" % kv for kv in sorted(hows.items())),
            statistics.median(lives), lives[-1], limit, over))
        verdicts.append("%s  %s sockets: every one closed within its timeout + 2 s (%.0f s): max %.2f s, %d over" % (
            "PASS" if over == 0 else "FAIL", kind, limit, lives[-1], over))
    lat = sorted(nres["lat"])
    p99 = T.R.percentile(lat, 99)
    lines.append("")
    lines.append("Normal client: %d requests, %d failed, p50 %.2f ms, p99 %.2f ms, max %.2f ms." % (
        nres["n"],
        len(nres["errs"]), T.R.percentile(lat, 50), p99, lat[-1] if lat else float("nan")))
    if nres["errs"]:
        lines.append("Normal failures (first 5): %s" % "; ".join(nres["errs"][:5]))
    lines.append("Worker fd count: baseline %d, peak %d, after %d; attack phase %.1f s; server alive after: %s." % (
        base_fd, fd_peak[0], fd_after, attack_s, alive))
    verdicts.append("%s  normal client p99 %.2f ms < 200 ms, %d failed" % (
        "PASS" if p99 < 200 and not nres["errs"] else "FAIL", p99, len(nres["errs"])))
    verdicts.append("%s  worker fd count back to baseline: %d -> peak %d -> %d" % (
        "PASS" if fd_after <= base_fd else "FAIL", base_fd, fd_peak[0], fd_after))
    lines += [""] + verdicts
    summary = "\n".join(lines)
    print(summary)
    with open(base + ".json", "w") as f:
        json.dump(dict(slow=res, normal=nres, base_fd=base_fd, fd_peak=fd_peak[0], fd_after=fd_after), f)
    T.write_meta(base + ".meta.txt", "slowloris — case B40 / issue 3", {"turnstile": cmd,
                 "normal client": "python3 bench/slowloris/run.py --normal-child PORT %d 0.1 (taskset -c 0)" % dur}, [
        "client: asyncio on core 0; lifetime of each slow socket measured from connect to EOF/reset/response",
        "watch limit %ds per slow socket; fd count polled every 0.25 s during the attack, and up to 5 s after" % a.watch,
    ], a.venv, tinfo, load_before, started, summary)
    print("\nwrote %s.{json,meta.txt}" % base)
    os.unlink(tbin)


if __name__ == "__main__":
    main()
