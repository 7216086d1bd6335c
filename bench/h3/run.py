"""HTTP/3 against HTTP/2 and HTTP/1.1 (issue 25): the same ASGI hello app
(bench/apps/asgi_hello.py), TLS for all three, at a fixed rate from an
open-loop client (bench/h3/load, quic-go's http3 client for h3), against
turnstile (--http3 on its TLS port) and Hypercorn (-k uvloop, its HTTP/3 by
aioquic on --quic-bind), one worker process each.

    python3 bench/h3/run.py --reps 5 --duration 10 --rate 1000 --conns 8

Debian 12's h2load (nghttp2 1.52.0) is built without ngtcp2 (no HTTP/3),
hence the Go client; it speaks all three protocols so they meet the same
client code. Method as bench/h2: the server tree on core 1, the client on
core 0 (taskset); each rep runs every (server, proto) arm once, the order
rotating by one per rep; before each run the driver waits for both cores
to be quiet (up to --quiet-max-wait s) and marks a run noisy when other
processes used more than --noise-max cores. Each run: a fresh server, one
request per connection, 2 s of warm-up at the rate (discarded), then
--duration s measured. Metrics: server CPU µs per request (/proc over the
server's tree between the client's "measure start" and "measure end"),
p50/p99/p99.9/max latency from each request's due time, errors.
Results: bench/results/h3-<stamp>.csv and .meta.txt.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import run as R  # noqa: E402
import turnlib as T  # noqa: E402

APPS = os.path.join(T.BENCH, "apps")
TARGET = "asgi_hello:app"
LOAD = os.path.join(T.WORK, "h3load")
SERVERS = ["turnstile", "hypercorn"]
PROTOS = ["h3", "h2", "h1"]


def argv(server, tbin, venv, port, cert, key):
    if server == "turnstile":
        # --http3 is on for every protocol's run: the h1/h2 figures carry
        # the idle UDP listener and the Alt-Svc header, as a deployment would.
        return [tbin, "--venv", venv, "--app-dir", APPS, "--host", T.HOST, "--port", str(port),
                "--admin-bind", "off", "--log-level", "warning", "--ssl-certfile", cert, "--ssl-keyfile", key,
                "--http3", TARGET]
    if server == "hypercorn":
        return [os.path.join(venv, "bin", "hypercorn"), "-b", "%s:%d" % (T.HOST, port),
                "--quic-bind", "%s:%d" % (T.HOST, port), "-w", "1", "-k", "uvloop", "--log-level", "warning",
                "-c", os.path.join(T.BENCH, "h2", "hypercorn.toml"), "--certfile", cert, "--keyfile", key, TARGET]
    raise ValueError(server)


def wait_ready(srv, port, proto, timeout=60):
    def probe():
        p = subprocess.run([LOAD, "-url", "https://%s:%d/" % (T.HOST, port), "-proto", proto, "-rate", "10",
                            "-duration", "100ms", "-warmup", "0s", "-conns", "1", "-timeout", "2s"],
                           capture_output=True, timeout=30)
        return None if p.returncode == 0 else p.stderr.decode(errors="replace")[-200:]
    return srv.wait_probe(probe, timeout)


def one(server, proto, a, tbin, cert, key):
    port = R.free_port()
    waited = T.quiet(a.quiet, a.quiet_max_wait)
    srv = T.Srv(server, argv(server, tbin, a.venv, port, cert, key), a.venv, APPS,
                os.path.join(a.logdir, "%s-%s.log" % (server, proto)))
    cmd = ["taskset", "-c", str(T.CLIENT_CORE), LOAD, "-url", "https://%s:%d/" % (T.HOST, port), "-proto", proto,
           "-rate", str(a.rate), "-duration", "%ds" % a.duration, "-warmup", "2s", "-conns", str(a.conns)]
    try:
        err = wait_ready(srv, port, proto)
        if err:
            return dict(error=err), srv.cmdline(), cmd, port
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        m0 = m1 = None
        out = []
        for line in p.stdout:
            if line.strip() == "measure start":
                m0 = T.Mark(srv.proc.pid)
            elif line.strip() == "measure end":
                m1 = T.Mark(srv.proc.pid)
            else:
                out.append(line)
        rc = p.wait()
        if rc != 0 or m0 is None or m1 is None:
            return dict(error="load exit %d: %s" % (rc, p.stderr.read()[-300:])), srv.cmdline(), cmd, port
        r = json.loads("".join(out))
        r.update(T.usage(m0, m1))
        r["quiet_wait_s"] = waited
        r["cpu_us_per_req"] = r["server_cpu_s"] / r["ok"] * 1e6 if r["ok"] else float("nan")
        r["noisy"] = r["others_cores"] > a.noise_max
        r["protos"] = " ".join("%s=%d" % kv for kv in sorted(r["protos"].items()))
        return r, srv.cmdline(), cmd, port
    finally:
        srv.stop()


COLS = ["rep", "server", "proto", "order", "rate", "conns", "sent", "ok", "errors", "p50_ms", "p99_ms", "p999_ms",
        "max_ms", "achieved_rps", "server_cpu_s", "cpu_us_per_req", "others_cores", "server_core_busy",
        "client_core_busy", "quiet_wait_s", "noisy", "protos", "first_error", "error"]


def fmtcell(v):
    if isinstance(v, float):
        return "%.4g" % v
    s = str(v)
    return '"%s"' % s.replace('"', "'").replace("\n", " ") if ("," in s or "\n" in s) else s


def summarize(rows, arms):
    lines = ["| server | proto | server CPU µs/req | vs turnstile h1 | p50 ms | p99 ms | p99.9 ms | max ms | errors | runs (quiet/all) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    def use_of(server, proto):
        rs = [r for r in rows if r["server"] == server and r["proto"] == proto and "ok" in r]
        quiet = [r for r in rs if not r.get("noisy")]
        return rs, quiet, (quiet if len(quiet) >= 3 else rs)

    b = use_of("turnstile", "h1")[2]
    base = statistics.median(r["cpu_us_per_req"] for r in b) if b else None
    for server, proto in arms:
        rs, quiet, use = use_of(server, proto)
        if not use:
            err = next((r.get("error", "") for r in rows if r["server"] == server and r["proto"] == proto), "")
            lines.append("| %s | %s | error: %s | | | | | | | 0/0 |" % (server, proto, err[:80].replace("|", "/")))
            continue
        med = lambda k: statistics.median(r[k] for r in use)  # noqa: E731
        cpu = med("cpu_us_per_req")
        lines.append("| %s | %s | %.1f | %s | %.2f | %.2f | %.2f | %.1f | %d | %d/%d%s |" % (
            server, proto, cpu, "%.2f×" % (cpu / base) if base else "", med("p50_ms"), med("p99_ms"), med("p999_ms"),
            med("max_ms"), sum(r["errors"] for r in rs), len(quiet), len(rs), "" if use is quiet else " †"))
    lines += ["", "† fewer than 3 quiet runs: medians over every run, noisy ones included."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--protos", default=",".join(PROTOS))
    ap.add_argument("--venv", default=T.default_venv())
    ap.add_argument("--turnstile-bin", default=os.path.join(T.ROOT, "bin", "turnstile"))
    ap.add_argument("--quiet", type=float, default=0.25)
    ap.add_argument("--quiet-max-wait", type=float, default=20)
    ap.add_argument("--noise-max", type=float, default=0.5)
    ap.add_argument("--out", default=T.RESULTS)
    a = ap.parse_args()
    arms = [(s, p) for s in a.servers.split(",") for p in a.protos.split(",")]
    started, load_before, stamp = R.utcnow(), R.loadavg(), T.stamp()
    subprocess.run(["go", "build", "-o", LOAD, "./h3/load"], cwd=T.BENCH, check=True)  # bench/ is its own module
    tbin, tinfo = T.snapshot_turnstile(a.turnstile_bin)
    cert, key = T.self_signed_cert()
    a.logdir = os.path.join(T.WORK, "h3-logs-" + stamp)
    os.makedirs(a.out, exist_ok=True)
    csv_path = os.path.join(a.out, "h3-%s.csv" % stamp)
    rows, commands = [], {}
    try:
        with open(csv_path, "w") as f:
            f.write(",".join(COLS) + "\n")
            for rep in range(a.reps):
                order = arms[rep % len(arms):] + arms[:rep % len(arms)]
                for i, (server, proto) in enumerate(order):
                    r, cmdline, cmd, port = one(server, proto, a, tbin, cert, key)
                    commands[server] = T.portless(cmdline, (port, "PORT"))
                    commands["load %s" % proto] = T.portless(cmd, (port, "PORT"))
                    r.update(rep=rep, server=server, proto=proto, order=i)
                    rows.append(r)
                    f.write(",".join(fmtcell(r.get(c, "")) for c in COLS) + "\n")
                    f.flush()
                    print("rep %d %-9s %s  %6.1f us/req  p50 %.2f p99 %.2f max %.1f ms  err %s  others %.2f%s%s" % (
                        rep, server, proto, r.get("cpu_us_per_req", float("nan")), r.get("p50_ms", float("nan")),
                        r.get("p99_ms", float("nan")), r.get("max_ms", float("nan")), r.get("errors", "?"),
                        r.get("others_cores", float("nan")), "  NOISY" if r.get("noisy") else "",
                        ("  ERROR " + r["error"][:200]) if r.get("error") else ""), flush=True)
    finally:
        if os.path.exists(tbin):
            os.unlink(tbin)
    summary = summarize(rows, arms)
    print(summary)
    freeze = R.sh([os.path.join(a.venv, "bin", "python"), "-m", "pip", "freeze", "--disable-pip-version-check"])
    peers = ", ".join(l for l in freeze.splitlines() if l.split("==")[0].lower() in ("hypercorn", "aioquic", "uvloop", "pylsqpack"))
    gomod = R.sh(["go", "-C", T.BENCH, "list", "-m", "github.com/quic-go/quic-go", "golang.org/x/net"])
    T.write_meta(csv_path[:-4] + ".meta.txt", "h3 (ASGI hello over HTTP/3, HTTP/2 and HTTP/1.1, all TLS, fixed rate)",
                 commands, [
                     "app: bench/apps/asgi_hello.py (%s); one worker process per server; uvloop where the server picks a loop" % TARGET,
                     "peers: %s" % peers,
                     "client: bench/h3/load (Go; quic-go http3.Transport for h3, x/net/http2.Transport for h2, "
                     "net/http.Transport without h2 for h1) %s" % gomod.replace("\n", ", "),
                     "open loop at %d req/s over %d client connections (h1: a pool of at most %d); latency from each "
                     "request's due time; 2 s warm-up at the rate discarded" % (a.rate, a.conns, a.conns),
                     "each rep runs every (server, proto) arm once, order rotating by one per rep; %d reps; %d s measured" % (a.reps, a.duration),
                     "TLS: self-signed P-256 certificate (bench/work/h2-certs); turnstile runs with --http3 in every arm",
                     "quiet: wait until both cores < %.2f busy (max %g s); noisy = others > %.2f cores" % (a.quiet, a.quiet_max_wait, a.noise_max),
                     "csv: %s" % os.path.relpath(csv_path, T.ROOT),
                 ], a.venv, tinfo, load_before, started, summary)
    print("wrote", csv_path)


if __name__ == "__main__":
    main()
