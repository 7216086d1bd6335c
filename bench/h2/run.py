"""HTTP/2 side by side (issue 9): h2load against turnstile, Granian
(--http 2) and Hypercorn (-k uvloop) serving the same ASGI hello app
(bench/apps/asgi_hello.py), over h2c with prior knowledge and over TLS
(h2 by ALPN), one worker process each.

    python3 bench/h2/run.py --reps 5 --duration 10 --clients 16 --streams 16

Method: the server tree on core 1, h2load on core 0 (taskset); each rep
runs every (mode, server) once, the server order rotating per rep
(interleaved); before each run the driver waits for both cores to be
quiet (up to --quiet-max-wait s) and a run where other processes used more
than --noise-max cores is marked noisy. Each run: start the server, wait
until h2load gets one 200, 2 s of discarded warm-up load, then
`h2load -t1 -c C -m M -D duration`. Metric: req/s (h2load's "finished"
line), server CPU per request (/proc over the server's tree), mean and max
request time. Results: bench/results/h2-<stamp>.csv and .meta.txt.
"""

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import run as R  # noqa: E402
import turnlib as T  # noqa: E402

APPS = os.path.join(T.BENCH, "apps")
TARGET = "asgi_hello:app"
SERVERS = ["turnstile", "granian", "hypercorn"]
# Go-only servers (--servers front-turnstile,front-xnet --modes h2c): the
# HTTP/2 front end without Python, through turnstile's bridge or bare x/net.
FRONT = os.path.join(T.WORK, "h2front")
MODES = ["h2c", "h2"]
# Also: mode "h1" (HTTP/1.1 over plain TCP, h2load --h1: turnstile's own
# HTTP/1.1 figure in the same run), and server "turnstile-base", a second
# turnstile binary (--turnstile-base-bin) with the same flags: old against
# new.


def argv(server, mode, tbin, venv, port, cert, key, basebin=None):
    tls = mode == "h2"
    if server in ("turnstile", "turnstile-base"):
        a = [tbin if server == "turnstile" else basebin, "--venv", venv, "--app-dir", APPS, "--host", T.HOST, "--port", str(port),
             "--admin-bind", "off", "--log-level", "warning"]
        if tls:
            a += ["--ssl-certfile", cert, "--ssl-keyfile", key]
    elif server == "granian":
        a = [os.path.join(venv, "bin", "granian"), "--interface", "asgi", "--http", "2", "--workers", "1",
             "--host", T.HOST, "--port", str(port), "--working-dir", APPS, "--log-level", "warning",
             "--no-access-log"]
        if tls:
            a += ["--ssl-certificate", cert, "--ssl-keyfile", key]
    elif server in ("front-turnstile", "front-xnet"):
        # Go alone, no Python (bench/h2/front): h2c only.
        a = [FRONT, "-impl", server[len("front-"):], "-addr", "%s:%d" % (T.HOST, port)]
        return a
    elif server == "hypercorn":
        a = [os.path.join(venv, "bin", "hypercorn"), "-b", "%s:%d" % (T.HOST, port), "-w", "1",
             "-k", "uvloop", "--log-level", "warning", "-c", os.path.join(T.BENCH, "h2", "hypercorn.toml")]
        if tls:
            a += ["--certfile", cert, "--keyfile", key]
    else:
        raise ValueError(server)
    return a + [TARGET]


def url(mode, port):
    return "%s://%s:%d/" % ("https" if mode == "h2" else "http", T.HOST, port)


def h2load(u, clients, streams, duration, mode="h2c"):
    # h2load --h1 pipelines -m requests per connection: HTTP/1.1 gets one
    # request in flight per connection and clients*streams connections.
    if mode == "h1":
        clients, streams = clients * streams, 1
    cmd = ["taskset", "-c", str(T.CLIENT_CORE), "h2load", "-t1", "-c", str(clients), "-m", str(streams),
           "-D", str(duration)] + (["--h1"] if mode == "h1" else []) + [u]
    p = subprocess.run(cmd, capture_output=True, timeout=duration + 60)
    return cmd, parse_h2load(p.stdout.decode(errors="replace"))


def parse_h2load(out):
    r = {}
    m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    if m:
        r["secs"], r["req_s"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out)
    if m:
        r.update(done=int(m.group(3)), succeeded=int(m.group(4)), failed=int(m.group(5)),
                 errored=int(m.group(6)), timeout=int(m.group(7)))
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if m:
        r["s2xx"] = int(m.group(1))
        r["non2xx"] = sum(int(m.group(i)) for i in (2, 3, 4))
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    if m:
        r["min_ms"], r["max_ms"], r["mean_ms"], r["sd_ms"] = (R.to_ms(m.group(i)) for i in (1, 2, 3, 4))
    m = re.search(r"Application protocol: (\S+)", out)
    r["proto"] = m.group(1) if m else "?"
    if "req_s" not in r:
        r["error"] = out[-400:]
    return r


def wait_ready(srv, u, timeout=60, mode="h2c"):
    def probe():
        p = subprocess.run(["h2load", "-n", "1", "-c", "1"] + (["--h1"] if mode == "h1" else []) + [u],
                           capture_output=True, timeout=30)
        out = p.stdout.decode(errors="replace")
        return None if re.search(r"status codes: 1 2xx", out) else out[-200:]
    return srv.wait_probe(probe, timeout)


def one(server, mode, a, tbin, cert, key, rep, logdir):
    port = R.free_port()
    av = argv(server, mode, tbin, a.venv, port, cert, key, a.turnstile_base_bin)
    waited = T.quiet(a.quiet, a.quiet_max_wait)
    srv = T.Srv(server, av, a.venv, APPS, os.path.join(logdir, "%s-%s.log" % (server, mode)))
    u = url(mode, port)
    try:
        err = wait_ready(srv, u, mode=mode)
        if err:
            return dict(error=err), srv.cmdline(), port
        h2load(u, a.clients, a.streams, 2, mode)  # warm-up, discarded
        m0 = T.Mark(srv.proc.pid)
        cmd, r = h2load(u, a.clients, a.streams, a.duration, mode)
        m1 = T.Mark(srv.proc.pid)
        r.update(T.usage(m0, m1))
        r["quiet_wait_s"] = waited
        done = r.get("done") or 0
        r["cpu_us_per_req"] = r["server_cpu_s"] / done * 1e6 if done else float("nan")
        r["noisy"] = r["others_cores"] > a.noise_max
        r["h2load"] = shlex.join(cmd)
        return r, srv.cmdline(), port
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--streams", type=int, default=16, help="h2load -m: concurrent streams per connection")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--venv", default=T.default_venv())
    ap.add_argument("--turnstile-bin", default=os.path.join(T.ROOT, "bin", "turnstile"))
    ap.add_argument("--turnstile-base-bin", help="server turnstile-base: another turnstile binary (old against new)")
    ap.add_argument("--quiet", type=float, default=0.25)
    ap.add_argument("--quiet-max-wait", type=float, default=20)
    ap.add_argument("--noise-max", type=float, default=0.5)
    ap.add_argument("--out", default=T.RESULTS)
    a = ap.parse_args()
    servers, modes = a.servers.split(","), a.modes.split(",")
    started, load_before, stamp = R.utcnow(), R.loadavg(), T.stamp()
    tbin, tinfo = T.snapshot_turnstile(a.turnstile_bin)
    if "turnstile-base" in servers:
        a.turnstile_base_bin, binfo = T.snapshot_turnstile(a.turnstile_base_bin, "-base")
        tinfo += "; turnstile-base: " + binfo
    if any(s.startswith("front-") for s in servers):
        subprocess.run(["go", "build", "-o", FRONT, "./h2/front"], cwd=T.BENCH, check=True)  # bench/ is its own module
    cert, key = T.self_signed_cert()
    logdir = os.path.join(T.WORK, "h2-logs-" + stamp)
    os.makedirs(a.out, exist_ok=True)
    csv_path = os.path.join(a.out, "h2-%s.csv" % stamp)
    cols = ["rep", "mode", "server", "order", "req_s", "done", "succeeded", "failed", "errored", "s2xx", "non2xx",
            "mean_ms", "max_ms", "sd_ms", "server_cpu_s", "cpu_us_per_req", "others_cores",
            "server_core_busy", "client_core_busy", "quiet_wait_s", "noisy", "proto", "error"]
    rows, commands = [], {}
    try:
        with open(csv_path, "w") as f:
            f.write(",".join(cols) + "\n")
            for rep in range(a.reps):
                for mode in modes:
                    order = servers[rep % len(servers):] + servers[:rep % len(servers)]
                    if mode == "h1":
                        # h1 is turnstile's own HTTP/1.1 figure (issue 24's
                        # yardstick); Granian runs --http 2 and speaks no h1.
                        order = [s for s in order if s.startswith("turnstile")]
                    for i, server in enumerate(order):
                        r, cmdline, port = one(server, mode, a, tbin, cert, key, rep, logdir)
                        commands["%s %s" % (server, mode)] = T.portless(cmdline, (port, "PORT"))
                        if "h2load" in r:
                            commands["h2load %s" % mode] = T.portless(r["h2load"], (port, "PORT"))
                        r.update(rep=rep, mode=mode, server=server, order=i)
                        rows.append(r)
                        f.write(",".join(fmtcell(r.get(c, "")) for c in cols) + "\n")
                        f.flush()
                        print("rep %d %-4s %-10s %9.0f req/s  %6.1f us/req  mean %.2f ms  others %.2f%s%s" % (
                            rep, mode, server, r.get("req_s", float("nan")), r.get("cpu_us_per_req", float("nan")),
                            r.get("mean_ms", float("nan")), r.get("others_cores", float("nan")),
                            "  NOISY" if r.get("noisy") else "", ("  ERROR " + r["error"][:200]) if r.get("error") else ""),
                            flush=True)
    finally:
        for b in (tbin, a.turnstile_base_bin):
            if b and os.path.exists(b):
                os.unlink(b)
    summary = summarize(rows, servers, modes)
    print(summary)
    meta = csv_path[:-4] + ".meta.txt"
    h2v = R.sh(["h2load", "--version"]).splitlines()[0]
    hyp = R.sh([os.path.join(a.venv, "bin", "python"), "-m", "pip", "show", "hypercorn"])
    hyp = next((l for l in hyp.splitlines() if l.startswith("Version")), "?")
    T.write_meta(meta, "h2 (ASGI hello over HTTP/2: h2c prior knowledge and TLS/ALPN)", commands, [
        "app: bench/apps/asgi_hello.py (%s); one worker process per server; uvloop where the server picks a loop" % TARGET,
        "h2load: %s; hypercorn %s" % (h2v, hyp),
        "each rep runs every (mode, server) once, server order rotating per rep; %d reps; %d s measured after 2 s warm-up" % (a.reps, a.duration),
        "load: h2load -t1 -c %d -m %d (%d streams in flight)" % (a.clients, a.streams, a.clients * a.streams),
        "TLS: self-signed P-256 certificate (bench/work/h2-certs), h2 by ALPN, the TLS version each server picks (1.3 here)",
        "quiet: wait until both cores < %.2f busy (max %g s); noisy = others > %.2f cores" % (a.quiet, a.quiet_max_wait, a.noise_max),
        "csv: %s" % os.path.relpath(csv_path, T.ROOT),
    ], a.venv, tinfo, load_before, started, summary)
    print("wrote", csv_path, "and", meta)


def fmtcell(v):
    if isinstance(v, float):
        return "%.4g" % v
    s = str(v)
    return '"%s"' % s.replace('"', "'").replace("\n", " ") if ("," in s or "\n" in s) else s


def summarize(rows, servers, modes):
    lines = ["| mode | server | req/s (median) | vs %s | server CPU µs/req | mean ms | failed | runs (quiet/all) |" % servers[0],
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for mode in modes:
        base = None
        for server in servers:
            rs = [r for r in rows if r["mode"] == mode and r["server"] == server and "req_s" in r]
            quiet = [r for r in rs if not r.get("noisy")]
            use = quiet if len(quiet) >= 3 else rs
            if mode == "h1" and not server.startswith("turnstile"):
                continue
            if not use:
                lines.append("| %s | %s | error | | | | | 0/0 |" % (mode, server))
                continue
            rps = statistics.median(r["req_s"] for r in use)
            cpu = statistics.median(r["cpu_us_per_req"] for r in use)
            mean = statistics.median(r["mean_ms"] for r in use)
            failed = sum(r.get("failed", 0) + r.get("errored", 0) + r.get("non2xx", 0) for r in rs)
            if base is None:
                base = rps
            vs = "%.2f×" % (rps / base) if base else ""
            lines.append("| %s | %s | %.0f | %s | %.1f | %.2f | %d | %d/%d%s |" % (
                mode, server, rps, vs, cpu, mean, failed, len(quiet), len(rs), "" if use is quiet else " †"))
    lines.append("")
    lines.append("† fewer than 3 quiet runs: medians over every run, noisy ones included.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
