#!/usr/bin/env python3
"""Worker-process scenarios (issue 8), two workers per server.

    python3 bench/workers.py stuck --reps 3 --rate 1000 --duration 10
    python3 bench/workers.py hello --reps 3 --duration 10

stuck  One of two workers is blocked for 5 s: 2 s into an open-loop
       vegeta run of the fast route (/) at --rate req/s, one request to
       /hold?5 holds the GIL of whichever worker takes it (bench/apps/stuck.py).
       Metric: latency of the fast route, p50/p99/p99.9/max, and how many
       fast requests took over 1 s. Run twice: with a new connection per
       request (vegeta -keepalive=false: the accept path decides which
       worker gets each request) and with kept-alive connections.
       turnstile runs with each accept gate (internal/server/gate.go:
       TURNSTILE_GATE=busy, the default with several workers; queue, the
       first design; off) to choose the gate with numbers.
hello  Saturation: wrk -c 64 on bench/apps/hello.py, requests/s and p99
       (turnstile with the busy and the queue gate: the gate's cost).

Servers: turnstile --workers 2 (4 Python threads each), gunicorn -w 2 -k
gthread --threads 4, granian --workers 2 --blocking-threads 4; all from the
bench venv. The servers are NOT pinned (two workers need both cores) and
the load generator runs on core 0: two workers plus the load generator
oversubscribe the machine's two cores, so absolute numbers are lower than
on a real host; compare servers within a run.

Before each run the driver waits (up to 60 s) until both cores were under
20% busy for a second: other engineers run benchmarks on the same cores.

Python 3 stdlib only. Results: bench/results/workers-<scenario>-<UTC>.csv
and .md (the summary, with the machine and the exact commands).
"""

import argparse
import csv
import datetime
import http.client
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
WORK = os.path.join(BENCH, "work")
APPS = os.path.join(BENCH, "apps")
HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def argv_for(name, a, port, module):
    venv = a.venv
    if name.startswith("turnstile"):
        return [a.turnstile_bin, "--venv", venv, "--app-dir", APPS, "--host", HOST, "--port", str(port),
                "--workers", "2", "--blocking-threads", "4", "--admin-bind", "off",
                "--log-level", "warning", module + ":app"]
    if name == "gunicorn":
        return [os.path.join(venv, "bin", "gunicorn"), "-w", "2", "-k", "gthread", "--threads", "4",
                "-b", "%s:%d" % (HOST, port), "--chdir", APPS, "--log-level", "warning", module + ":app"]
    if name == "granian":
        return [os.path.join(venv, "bin", "granian"), "--interface", "wsgi", "--workers", "2",
                "--blocking-threads", "4", "--host", HOST, "--port", str(port), "--working-dir", APPS,
                "--log-level", "warning", "--no-access-log", module + ":app"]
    raise SystemExit("unknown server " + name)


def env_for(name, venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "TURNSTILE_GATE"}
    env["VIRTUAL_ENV"] = venv
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    if name.startswith("turnstile-gate-"):
        env["TURNSTILE_GATE"] = name[len("turnstile-gate-"):]
    return env


class Server:
    def __init__(self, name, a, module, log):
        self.port = free_port()
        self.argv = argv_for(name, a, self.port, module)
        self.log = open(log, "ab")
        self.log.write(("\n# %s\n" % shlex.join(self.argv)).encode())
        self.log.flush()
        self.proc = subprocess.Popen(self.argv, cwd=APPS, env=env_for(name, a.venv), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def get(self, path, timeout=5):
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.get("/", 2)[0] == 200:
                    # Every worker: a few fresh connections each.
                    for _ in range(20):
                        self.get("/", 2)
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()


def core_ticks():
    """{core: (busy, total)} jiffies from /proc/stat."""
    out = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            v = [int(x) for x in f[1:]]
            out[int(f[0][3:])] = (sum(v) - v[3] - v[4], sum(v))
    return out


def wait_quiet(threshold=0.2, max_wait=60):
    """Wait until every core was under `threshold` busy for 1 s (the
    machine is shared); returns the seconds waited (max_wait at most)."""
    t0 = time.monotonic()
    while True:
        a = core_ticks()
        time.sleep(1)
        b = core_ticks()
        busy = [(b[c][0] - a[c][0]) / max(1, b[c][1] - a[c][1]) for c in a]
        if max(busy) < threshold or time.monotonic() - t0 >= max_wait:
            return round(time.monotonic() - t0 - 1, 1)


def percentile(vals, p):
    if not vals:
        return float("nan")
    k = max(0, min(len(vals) - 1, int(-(-p * len(vals) // 100)) - 1))
    return vals[k]


def vegeta(a, port, rate, duration, keepalive, out):
    targets = os.path.join(WORK, "workers-targets.txt")
    with open(targets, "w") as f:
        f.write("GET http://%s:%d/\n" % (HOST, port))
    cmd = ["taskset", "-c", str(a.client_core), a.vegeta, "attack", "-rate", "%d/1s" % rate,
           "-duration", "%ds" % duration, "-timeout", "15s", "-max-body", "0",
           "-keepalive=%s" % ("true" if keepalive else "false"), "-targets", targets, "-output", out]
    return cmd


def parse_vegeta(a, binfile, stall_start, stall_end):
    out = subprocess.run([a.vegeta, "encode", "--to", "csv", binfile], capture_output=True, check=True).stdout.decode()
    lat, during, errs = [], [], {}
    for row in csv.reader(out.splitlines()):
        ts, code, latency, err = int(row[0]) / 1e9, int(row[1]), int(row[2]) / 1e6, row[5]
        lat.append(latency)
        if stall_start <= ts < stall_end:
            during.append(latency)
        if not (200 <= code < 300) or err:
            key = (err or "status %d" % code)[:60]
            errs[key] = errs.get(key, 0) + 1
    lat.sort()
    during.sort()
    return dict(requests=len(lat), errors=sum(errs.values()), error_detail="; ".join("%s x%d" % kv for kv in errs.items()),
                p50_ms=percentile(lat, 50), p99_ms=percentile(lat, 99), p999_ms=percentile(lat, 99.9),
                max_ms=lat[-1] if lat else float("nan"), over_1s=sum(1 for x in lat if x > 1000),
                stall_p99_ms=percentile(during, 99), stall_requests=len(during))


def run_stuck(a, name, rep, keepalive, rows, stamp):
    quiet = wait_quiet()
    log = os.path.join(WORK, "logs", "workers-stuck-%s-%s.log" % (stamp, name))
    s = Server(name, a, "stuck", log)
    try:
        if not s.wait_ready():
            print("  %s: did not start (see %s)" % (name, log), flush=True)
            return
        binfile = os.path.join(WORK, "workers-stuck.bin")
        start = time.time()
        att = subprocess.Popen(vegeta(a, s.port, a.rate, a.duration, keepalive, binfile))
        time.sleep(2)
        held = {}

        def hold():
            t = time.time()
            try:
                held["status"] = s.get("/hold?%g" % a.hold, timeout=a.hold + 20)[0]
            except OSError as e:
                held["status"] = repr(e)
            held["s"] = time.time() - t

        stall_start = time.time()
        th = threading.Thread(target=hold)
        th.start()
        att.wait()
        th.join()
        r = parse_vegeta(a, binfile, stall_start, stall_start + a.hold)
        r.update(scenario="stuck", server=name, rep=rep, keepalive=keepalive, rate=a.rate, duration_s=a.duration,
                 hold_s=a.hold, hold_status=held.get("status"), hold_took_s=round(held.get("s", 0), 2),
                 quiet_wait_s=quiet, loadavg=open("/proc/loadavg").read().split()[0],
                 started_utc=datetime.datetime.fromtimestamp(start, datetime.timezone.utc).strftime("%H:%M:%SZ"))
        rows.append(r)
        print("  %-22s keepalive=%-5s p50 %7.2f ms  p99 %8.2f ms  p99.9 %8.2f ms  max %8.1f ms  >1s %4d  err %d  hold %s"
              % (name, keepalive, r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"], r["over_1s"], r["errors"], r["hold_status"]), flush=True)
    finally:
        s.stop()


def run_hello(a, name, rep, rows, stamp):
    quiet = wait_quiet()
    log = os.path.join(WORK, "logs", "workers-hello-%s-%s.log" % (stamp, name))
    s = Server(name, a, "hello", log)
    try:
        if not s.wait_ready():
            print("  %s: did not start (see %s)" % (name, log), flush=True)
            return
        url = "http://%s:%d/" % (HOST, s.port)
        subprocess.run(["taskset", "-c", str(a.client_core), "wrk", "-t1", "-c", str(a.conns), "-d", "1s", url],
                       capture_output=True)
        out = subprocess.run(["taskset", "-c", str(a.client_core), "wrk", "-t1", "-c", str(a.conns),
                              "-d", "%ds" % a.duration, "--timeout", "5s", "--latency", url],
                             capture_output=True, text=True).stdout
        r = dict(scenario="hello", server=name, rep=rep, conns=a.conns, duration_s=a.duration, quiet_wait_s=quiet,
                 loadavg=open("/proc/loadavg").read().split()[0])
        for line in out.splitlines():
            f = line.split()
            if line.startswith("Requests/sec:"):
                r["rps"] = float(f[1])
            elif len(f) == 2 and f[0] in ("50%", "99%"):
                r["p%s_ms" % f[0][:-1]] = to_ms(f[1])
            elif line.strip().startswith("Socket errors") or line.strip().startswith("Non-2xx"):
                r["errors"] = line.strip()
        rows.append(r)
        print("  %-22s %9.0f req/s  p50 %6.2f ms  p99 %7.2f ms %s" % (name, r.get("rps", float("nan")), r.get("p50_ms", float("nan")),
                                                                  r.get("p99_ms", float("nan")), r.get("errors", "")), flush=True)
    finally:
        s.stop()


def to_ms(t):
    for unit, mul in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if t.endswith(unit):
            return float(t[:-len(unit)]) * mul
    return float("nan")


def med(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["stuck", "hello"])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--rate", type=int, default=1000, help="stuck: fast-route requests/s (open loop)")
    p.add_argument("--hold", type=float, default=5, help="stuck: seconds one worker is blocked")
    p.add_argument("--conns", type=int, default=64, help="hello: wrk connections")
    p.add_argument("--keepalive", default="false,true", help="stuck: vegeta keep-alive settings to run")
    p.add_argument("--servers", default=None)
    p.add_argument("--client-core", type=int, default=0)
    p.add_argument("--venv", default=os.path.join(WORK, "venv-%d.%d" % sys.version_info[:2]))
    p.add_argument("--turnstile-bin", default=os.path.join(ROOT, "bin", "turnstile"))
    p.add_argument("--vegeta", default=os.path.join(WORK, "bin", "vegeta"))
    p.add_argument("--out", default=os.path.join(BENCH, "results"))
    a = p.parse_args()
    if a.servers is None:
        a.servers = ("turnstile,turnstile-gate-queue,turnstile-gate-off,gunicorn,granian" if a.scenario == "stuck"
                     else "turnstile,turnstile-gate-queue,gunicorn,granian")
    servers = a.servers.split(",")
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rows = []
    t0 = time.time()
    for rep in range(a.reps):
        order = servers[rep % len(servers):] + servers[:rep % len(servers)]
        print("rep %d" % (rep + 1), flush=True)
        for name in order:
            if a.scenario == "stuck":
                for ka in a.keepalive.split(","):
                    run_stuck(a, name, rep, ka == "true", rows, stamp)
            else:
                run_hello(a, name, rep, rows, stamp)
    base = os.path.join(a.out, "workers-%s-%s" % (a.scenario, stamp))
    keys = sorted({k for r in rows for k in r})
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    lines = ["# workers-%s, %s" % (a.scenario, stamp), "",
             "Command: `python3 bench/workers.py %s`" % " ".join(shlex.quote(x) for x in sys.argv[1:]),
             "Machine: %s, %d cores; servers unpinned, load generator on core %d (two workers + the "
             "load generator oversubscribe the two cores). Medians over %d reps; run took %.0f s." %
             (cpu_model(), os.cpu_count(), a.client_core, a.reps, time.time() - t0),
             "Load average after: %s" % open("/proc/loadavg").read().strip(), ""]
    if a.scenario == "stuck":
        lines += ["One of two workers blocked %gs (GIL held in C) 2 s into a %d s open-loop run at %d req/s of the fast route." %
                  (a.hold, a.duration, a.rate), "",
                  "| server | keep-alive | p50 ms | p99 ms | p99.9 ms | max ms | fast requests > 1 s | p99 during the stall ms | errors |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name in servers:
            for ka in a.keepalive.split(","):
                rs = [r for r in rows if r["server"] == name and r["keepalive"] == (ka == "true")]
                if rs:
                    lines.append("| %s | %s | %.2f | %.1f | %.1f | %.0f | %.0f | %.1f | %.0f |" % (
                        name, ka, med(rs, "p50_ms"), med(rs, "p99_ms"), med(rs, "p999_ms"), med(rs, "max_ms"),
                        med(rs, "over_1s"), med(rs, "stall_p99_ms"), med(rs, "errors")))
    else:
        lines += ["wrk -t1 -c %d -d %ds on the hello app." % (a.conns, a.duration), "",
                  "| server | req/s | p50 ms | p99 ms |", "|---|---|---|---|"]
        for name in servers:
            rs = [r for r in rows if r["server"] == name]
            if rs:
                lines.append("| %s | %.0f | %.2f | %.2f |" % (name, med(rs, "rps"), med(rs, "p50_ms"), med(rs, "p99_ms")))
    md = "\n".join(lines) + "\n"
    with open(base + ".md", "w") as f:
        f.write(md)
    print()
    print(md)
    print("wrote %s.csv and .md" % base)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
