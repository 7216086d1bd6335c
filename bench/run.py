#!/usr/bin/env python3
"""Side-by-side benchmark driver for turnstile and its peers.

Python 3 stdlib only; run it with the system python3 after bench/setup.sh:

    python3 bench/run.py wsgi-hello --reps 5 --conns 16,64,256 --duration 10 \
        --servers turnstile,granian,gunicorn,uwsgi

Method (bench/README.md has the long form):
  * the server is pinned to one core (taskset -c 1), the load generator to
    the other (taskset -c 0);
  * saturation phase: wrk, closed loop, requests/s;
  * latency phase: vegeta, open loop at a fixed rate (half the slowest
    server's median capacity unless --rate), p50/p99/p99.9/max;
  * every run starts a fresh server; repetitions are interleaved
    (round-robin over servers inside each repetition, the order rotated
    by one each repetition); results are medians over repetitions;
  * overhead is server CPU-seconds per request: utime+stime of the
    server's whole process tree from /proc, after minus before, divided
    by requests completed.

Writes bench/results/<scenario>-<UTC>.csv (one row per
server x conns|rate x rep x phase), .meta.txt (machine, versions, exact
command lines, load average) and .bench.txt (benchstat format), and prints
a markdown summary of medians and ratios against turnstile.
"""

import argparse
import csv
import hashlib
import datetime
import http.client
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
WORK = os.path.join(BENCH, "work")
APPS = os.path.join(BENCH, "apps")
LOGS = os.path.join(WORK, "logs")
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

SCENARIOS = {
    "wsgi-hello": dict(interface="wsgi", module="hello", expect=b"Hello, World!",
                       what="WSGI hello world: 13-byte text/plain body; the server's own per-request cost"),
    "wsgi-json": dict(interface="wsgi", module="jsonapp", expect=b'"message"',
                      what="WSGI json.dumps of a small dict per request"),
    "wsgi-django": dict(interface="wsgi", module="djangoapp", expect=b"<h1>Hello, World!</h1>",
                        what="Django 5.2, one view rendering a tiny template, two middlewares, no DB"),
    "wsgi-flask": dict(interface="wsgi", module="flaskapp", expect=b"Hello, World!",
                       what="Flask 3.1, one route returning a short text body"),
    "asgi-hello": dict(interface="asgi", module="asgi_hello", expect=b"Hello, World!",
                       what="ASGI hello world: 13-byte text/plain body"),
    "asgi-json": dict(interface="asgi", module="asgi_json", expect=b'"message"',
                      what="ASGI json.dumps of a small dict per request (raw ASGI)"),
    "asgi-fastapi": dict(interface="asgi", module="asgi_fastapi", expect=b'"tags"', path="/items/42?q=hello",
                         what="FastAPI 0.165 JSON route: path and query parameters, a pydantic response model"),
}
DEFAULT_SERVERS = {
    "wsgi": "turnstile,granian,gunicorn,uwsgi",
    "asgi": "turnstile,granian,uvicorn,hypercorn,daphne",
}

# ---------------------------------------------------------------- servers
# Each builder returns the argv (without the taskset prefix) for one server
# process serving `target` (MODULE:app) on `port`, one worker process.


def argv_turnstile(c, port):
    argv = [c.turnstile_bin, "--venv", c.venv, "--app-dir", APPS, "--host", HOST,
            "--port", str(port), "--blocking-threads", str(c.threads),
            "--admin-bind", "off", "--log-level", "warning"]
    return argv + shlex.split(c.turnstile_args) + [c.target]


def argv_granian(c, port):
    # granian refuses --blocking-threads > 1 for ASGI (one event loop).
    threads = ["--blocking-threads", str(c.threads)] if c.interface == "wsgi" else []
    return [c.bin("granian"), "--interface", c.interface, "--workers", "1"] + threads + [
            "--host", HOST, "--port", str(port), "--working-dir", APPS,
            "--log-level", "warning", "--no-access-log", c.target]


def argv_gunicorn(c, port):
    return [c.bin("gunicorn"), "-k", "gthread", "-w", "1", "--threads", str(c.threads),
            "-b", "%s:%d" % (HOST, port), "--chdir", APPS, "--log-level", "warning", c.target]


def argv_uwsgi(c, port):
    # --http-socket: uWSGI's own HTTP parser in the worker (no router
    # process). It answers one request per connection and then closes,
    # without saying so; --add-header "Connection: close" says so, so wrk
    # reconnects cleanly instead of counting a read error per request.
    # --module instead of --wsgi-file so the app is imported under its real
    # name (djangoapp uses ROOT_URLCONF=__name__). --listen: uWSGI's default
    # backlog is 100, below the 256 connections tried.
    return [c.bin("uwsgi"), "--http-socket", "%s:%d" % (HOST, port),
            "--add-header", "Connection: close", "--master", "--processes", "1",
            "--threads", str(c.threads), "--home", c.venv, "--chdir", APPS,
            "--module", c.target, "--disable-logging", "--die-on-term", "--need-app",
            "--listen", "1024"]


def argv_uwsgi_keepalive(c, port):
    # --http11-socket keeps connections open, but a thread stays with its
    # connection: with more connections than threads the rest wait in the
    # backlog unserved (see the conns_served column). Not in the defaults.
    return [c.bin("uwsgi"), "--http11-socket", "%s:%d" % (HOST, port), "--master",
            "--processes", "1", "--threads", str(c.threads), "--home", c.venv,
            "--chdir", APPS, "--module", c.target, "--disable-logging",
            "--die-on-term", "--need-app", "--listen", "1024"]


def argv_uvicorn(c, port):
    return [c.bin("uvicorn"), "--host", HOST, "--port", str(port), "--workers", "1",
            "--loop", "uvloop", "--http", "httptools", "--app-dir", APPS,
            "--log-level", "warning", "--no-access-log", c.target]


def argv_hypercorn(c, port):
    return [c.bin("hypercorn"), "-b", "%s:%d" % (HOST, port), "-w", "1", "-k", "uvloop",
            "--log-level", "warning", c.target]


def argv_daphne(c, port):
    return [c.bin("daphne"), "-b", HOST, "-p", str(port), "-v", "0", c.target]


SERVERS = {
    "turnstile": dict(argv=argv_turnstile, interfaces=("wsgi", "asgi")),
    "granian": dict(argv=argv_granian, interfaces=("wsgi", "asgi")),
    "gunicorn": dict(argv=argv_gunicorn, interfaces=("wsgi",)),
    "uwsgi": dict(argv=argv_uwsgi, interfaces=("wsgi",)),
    "uwsgi-keepalive": dict(argv=argv_uwsgi_keepalive, interfaces=("wsgi",), exe="uwsgi"),
    "uvicorn": dict(argv=argv_uvicorn, interfaces=("asgi",)),
    "hypercorn": dict(argv=argv_hypercorn, interfaces=("asgi",)),
    "daphne": dict(argv=argv_daphne, interfaces=("asgi",)),
}


class Ctx:
    def __init__(self, args, scen):
        self.venv = args.venv
        self.threads = args.threads
        self.interface = scen["interface"]
        self.target = scen["module"] + ":app"
        self.turnstile_bin = args.turnstile_bin
        self.turnstile_args = args.turnstile_args

    def bin(self, name):
        return os.path.join(self.venv, "bin", name)


# ---------------------------------------------------------------- /proc


def proc_stat(pid):
    """(ppid, ticks) of one process, ticks = utime+stime+cutime+cstime.

    cutime/cstime hold children that exited and were reaped, so a worker
    that dies mid-run is not lost; live children are summed separately.
    """
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[1]), sum(int(x) for x in rest[11:15])


def proc_snapshot():
    """{pid: (ppid, ticks)} for every process now."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st:
                stats[int(name)] = st
    return stats


def tree_ticks(stats, root):
    """Ticks of `root` and all its descendants in a snapshot (None if gone)."""
    if root not in stats:
        return None
    kids = {}
    for pid, (ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo.extend(kids.get(pid, ()))
    return total


class CPUMark:
    """CPU counters at one instant: the server tree, this driver's tree
    (server + load generator), and every process on the machine.

    others = all processes minus this driver's tree: compilers and tests of
    other people sharing the 2 cores. A process that exits during the run is
    reaped into its parent's cutime, so the difference of two marks still
    holds its CPU.
    """

    def __init__(self, server_pid):
        stats = proc_snapshot()
        self.server = tree_ticks(stats, server_pid)
        self.total = sum(t for _, t in stats.values())
        self.driver = tree_ticks(stats, os.getpid()) or 0
        self.kids = children_cpu()
        self.cores = core_ticks()
        self.t = time.monotonic()


def tree_cpu_seconds(root):
    """CPU seconds used so far by `root` and all its descendants."""
    t = tree_ticks(proc_snapshot(), root)
    return None if t is None else t / CLK_TCK


def core_ticks():
    """{core: (busy, total, irq)} from /proc/stat.

    busy counts user+nice+system+steal (processes, and the hypervisor taking
    the core away); irq counts irq+softirq, the kernel's packet work, which
    is no process's CPU time. Both are used to see other load on our cores.
    """
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+) (.*)", line)
            if m:
                v = [int(x) for x in m.group(2).split()][:8]
                user, nice, system, idle, iowait, irq, softirq, steal = v + [0] * (8 - len(v))
                out[int(m.group(1))] = (user + nice + system + steal, sum(v), irq + softirq)
    return out


def core_busy(before, after, core, field=0):
    """Share of the core's time between two core_ticks() in `field` (0 busy, 2 irq)."""
    b, a = before.get(core), after.get(core)
    if not b or not a or a[1] <= b[1]:
        return float("nan")
    return (a[field] - b[field]) / (a[1] - b[1])


def children_cpu():
    """CPU seconds of this driver's waited-for children (the load generator)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_quiet(cores, threshold, max_wait):
    """Wait until every core in `cores` was under `threshold` busy for 1 s.

    The machine is shared; a compile on our cores wrecks a run. Returns the
    seconds waited (max_wait at most).
    """
    t0 = time.monotonic()
    while True:
        k0 = core_ticks()
        time.sleep(1)
        k1 = core_ticks()
        if all(core_busy(k0, k1, c) < threshold for c in cores):
            return time.monotonic() - t0 - 1
        if time.monotonic() - t0 >= max_wait:
            return time.monotonic() - t0 - 1


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().strip()


# ---------------------------------------------------------------- processes


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def server_env(venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["VIRTUAL_ENV"] = venv
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    return env


class Server:
    def __init__(self, name, argv, core, venv, logpath):
        self.name, self.argv, self.logpath = name, argv, logpath
        self.cmd = ["taskset", "-c", str(core)] + argv
        self.log = open(logpath, "ab")
        self.log.write(("\n# %s %s\n" % (utcnow(), shlex.join(self.cmd))).encode())
        self.log.flush()
        # taskset execs the server, so proc.pid is the server's own pid.
        self.proc = subprocess.Popen(self.cmd, cwd=APPS, env=server_env(venv),
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, port, path, expect, timeout):
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "exited with %d" % self.proc.returncode
            try:
                conn = http.client.HTTPConnection(HOST, port, timeout=2)
                conn.request("GET", path, headers={"Host": HOST})
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                if resp.status == 200 and expect in body:
                    return None
                last = "status %d body %r" % (resp.status, body[:200])
            except OSError as e:
                last = repr(e)
            time.sleep(0.1)
        return "not ready after %ss: %s" % (timeout, last)

    def cpu(self):
        return tree_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # Leftovers in the session (a worker that outlived its master).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()

    def log_tail(self, n=15):
        try:
            with open(self.logpath, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join("    " + l for l in lines[-n:])
        except OSError:
            return ""


# ---------------------------------------------------------------- clients

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m|h)$", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def wrk_cmd(args, conns, duration, url):
    return ["taskset", "-c", str(args.client_core), args.wrk, "-t1", "-c", str(conns),
            "-d", "%ds" % duration, "--timeout", args.wrk_timeout, "--latency", url]


def parse_wrk(out):
    r = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    if m:
        r["requests"] = int(m.group(1))
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    r["socket_errors_detail"] = "connect %s read %s write %s timeout %s" % m.groups() if m else ""
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(r"^\s+%s%%\s+(\S+)" % pct, out, re.M)
        if m:
            r[key] = to_ms(m.group(1))
    m = re.search(r"^\s+Latency\s+(\S+)\s+\S+\s+(\S+)", out, re.M)
    if m:
        r["mean_ms"], r["max_ms"] = to_ms(m.group(1)), to_ms(m.group(2))
    return r


def vegeta_cmd(args, rate, duration, targets, out):
    # GOGC=off: vegeta's own garbage collector stops its one core for about
    # 0.5 ms every 150 ms at 3 400 req/s, and every response in flight then
    # reads that pause as server latency (clusters of slow results at the
    # collector's times, the same for every server). GOMEMLIMIT bounds the
    # heap it grows instead (about 400 MB for 12 s at 5 000 req/s).
    return ["env", "GOGC=off", "GOMEMLIMIT=2GiB",
            "taskset", "-c", str(args.client_core), args.vegeta, "attack",
            "-rate", "%d/1s" % rate, "-duration", "%ds" % duration, "-timeout", "10s",
            "-max-body", "0", "-targets", targets, "-output", out]


def percentile(sorted_vals, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


def parse_vegeta(args, binfile):
    out = subprocess.run([args.vegeta, "encode", "--to", "csv", binfile],
                         capture_output=True, check=True).stdout.decode()
    lat, ok, errs, first, last = [], 0, {}, None, None
    for row in csv.reader(out.splitlines()):
        ts, code, latency, err = int(row[0]), int(row[1]), int(row[2]), row[5]
        lat.append(latency / 1e6)
        first = ts if first is None else min(first, ts)
        last = ts if last is None else max(last, ts)
        if 200 <= code < 300 and not err:
            ok += 1
        else:
            key = err or "status %d" % code
            errs[key] = errs.get(key, 0) + 1
    lat.sort()
    return dict(
        requests=len(lat), ok=ok, errors=len(lat) - ok,
        errors_detail="; ".join("%s x%d" % (k[:80], v) for k, v in sorted(errs.items())),
        p50_ms=percentile(lat, 50), p99_ms=percentile(lat, 99),
        p999_ms=percentile(lat, 99.9), max_ms=lat[-1] if lat else float("nan"),
        achieved_rate=(len(lat) - 1) / ((last - first) / 1e9) if lat and last > first else float("nan"),
    )


# ---------------------------------------------------------------- run


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sh(cmd, timeout=30):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
        return (p.stdout + p.stderr).decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return "(%s)" % e


FIELDS = ["scenario", "phase", "rep", "server", "conns", "rate", "duration_s", "requests",
          "rps", "errors", "error_detail", "server_cpu_s", "cpu_us_per_req", "p50_ms",
          "p99_ms", "p999_ms", "max_ms", "conns_served", "client_cpu_s", "server_core_busy", "client_core_busy",
          "server_core_irq", "others_cpu_s", "others_cores", "valid", "quiet_wait_s",
          "loadavg_before", "started_utc"]


class Runner:
    def __init__(self, args, scen):
        self.args, self.scen = args, scen
        self.ctx = Ctx(args, scen)
        self.url = "http://%s:%%d%s" % (HOST, args.path)
        self.rows = []
        self.commands = {}
        os.makedirs(LOGS, exist_ok=True)
        os.makedirs(args.out, exist_ok=True)
        self.stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.base = os.path.join(args.out, "%s-%s" % (args.scenario, self.stamp))
        self.csvf = open(self.base + ".csv", "w", newline="")
        self.csv = csv.DictWriter(self.csvf, FIELDS, extrasaction="ignore")
        self.csv.writeheader()
        self.dead = set()

    def record(self, row):
        row.setdefault("scenario", self.args.scenario)
        # A run during which other processes took a real share of either
        # pinned core is kept in the CSV but marked invalid, and repeated.
        noise = row.get("others_cores", 0.0)
        row["valid"] = 0 if (noise == noise and noise > self.args.noise_max) else 1
        self.rows.append(row)
        self.csv.writerow({k: "%.6g" % v if isinstance(v, float) else v for k, v in row.items()})
        self.csvf.flush()

    def start(self, name):
        self.waited = 0.0
        if name in self.dead:
            return None, 0
        if self.args.quiet > 0:
            self.waited = wait_quiet((self.args.server_core, self.args.client_core),
                                     self.args.quiet, self.args.quiet_max_wait)
        port = free_port()
        argv = SERVERS[name]["argv"](self.ctx, port)
        self.commands.setdefault(name, shlex.join(
            ["taskset", "-c", str(self.args.server_core)] + argv).replace(str(port), "PORT"))
        log = os.path.join(LOGS, "%s-%s-%s.log" % (self.args.scenario, self.stamp, name))
        srv = Server(name, argv, self.args.server_core, self.args.venv, log)
        err = srv.wait_ready(port, self.args.path, self.scen["expect"], self.args.start_timeout)
        if err:
            srv.stop()
            self.dead.add(name)
            print("  %s failed to start: %s (not tried again in this run)\n%s" % (
                name, err, srv.log_tail()), flush=True)
            return None, port
        return srv, port

    def one_saturation(self, rep, name, conns):
        d = self.args.duration
        srv, port = self.start(name)
        row = dict(phase="saturation", rep=rep, server=name, conns=conns, duration_s=d,
                   started_utc=utcnow(), loadavg_before=loadavg().split()[0],
                   quiet_wait_s=self.waited)
        if not srv:
            row.update(errors=-1, error_detail="failed to start")
            self.record(row)
            return
        try:
            url = self.url % port
            if self.args.warmup > 0:
                subprocess.run(wrk_cmd(self.args, conns, self.args.warmup, url), capture_output=True)
            cmd = wrk_cmd(self.args, conns, d, url)
            self.commands.setdefault("wrk", shlex.join(cmd).replace(str(port), "PORT"))
            m0 = CPUMark(srv.proc.pid)
            p = subprocess.run(cmd, capture_output=True, timeout=d + 60)
            m1 = CPUMark(srv.proc.pid)
            alive = srv.proc.poll() is None
        finally:
            srv.stop()
        out = p.stdout.decode(errors="replace")
        r = parse_wrk(out)
        if "requests" not in r:
            row.update(errors=-1, error_detail="wrk: " + (out + p.stderr.decode())[-300:].replace("\n", " | "))
            self.record(row)
            return
        cpu = (m1.server - m0.server) / CLK_TCK if None not in (m0.server, m1.server) else float("nan")
        errors = r["socket_errors"] + r["non2xx"]
        detail = []
        if r["socket_errors"]:
            detail.append("socket " + r["socket_errors_detail"])
        if r["non2xx"]:
            detail.append("non-2xx %d" % r["non2xx"])
        if not alive:
            detail.append("server died during the run")
        row.update(requests=r["requests"], rps=r.get("rps"), errors=errors,
                   error_detail="; ".join(detail), server_cpu_s=cpu,
                   cpu_us_per_req=cpu / r["requests"] * 1e6 if r["requests"] else float("nan"),
                   p50_ms=r.get("p50_ms"), p99_ms=r.get("p99_ms"), max_ms=r.get("max_ms"),
                   conns_served=r["rps"] * r["mean_ms"] / 1e3 if "mean_ms" in r and "rps" in r else float("nan"),
                   **self.cores(m0, m1))
        self.record(row)
        print("  rep %d  c=%-4d %-10s %9.0f req/s  %7.1f us-cpu/req  errors %d%s" % (
            rep, conns, name, r.get("rps", 0), row["cpu_us_per_req"], errors,
            "  (%s)" % row["error_detail"] if row["error_detail"] else ""), flush=True)

    def one_latency(self, rep, name, rate):
        d = self.args.duration
        srv, port = self.start(name)
        row = dict(phase="latency", rep=rep, server=name, rate=rate, duration_s=d,
                   started_utc=utcnow(), loadavg_before=loadavg().split()[0],
                   quiet_wait_s=self.waited)
        if not srv:
            row.update(errors=-1, error_detail="failed to start")
            self.record(row)
            return
        targets = os.path.join(WORK, "targets-%s.txt" % self.stamp)
        binfile = os.path.join(WORK, "vegeta-%s.bin" % self.stamp)
        with open(targets, "w") as f:
            f.write("GET %s\n" % (self.url % port))
        try:
            if self.args.warmup > 0:
                subprocess.run(vegeta_cmd(self.args, rate, self.args.warmup, targets, os.devnull),
                               capture_output=True)
            cmd = vegeta_cmd(self.args, rate, d, targets, binfile)
            self.commands.setdefault("vegeta", shlex.join(cmd).replace(targets, "TARGETS").replace(binfile, "OUT.bin")
                                     + "   # TARGETS: GET http://127.0.0.1:PORT%s" % self.args.path)
            m0 = CPUMark(srv.proc.pid)
            p = subprocess.run(cmd, capture_output=True, timeout=d + 60)
            m1 = CPUMark(srv.proc.pid)
            alive = srv.proc.poll() is None
        finally:
            srv.stop()
        if p.returncode != 0:
            row.update(errors=-1, error_detail="vegeta: " + p.stderr.decode()[-300:])
            self.record(row)
            return
        r = parse_vegeta(self.args, binfile)
        os.unlink(binfile)
        os.unlink(targets)
        cpu = (m1.server - m0.server) / CLK_TCK if None not in (m0.server, m1.server) else float("nan")
        detail = r["errors_detail"] + ("" if alive else "; server died during the run")
        row.update(requests=r["requests"], rps=r["achieved_rate"], errors=r["errors"],
                   error_detail=detail, server_cpu_s=cpu,
                   cpu_us_per_req=cpu / r["ok"] * 1e6 if r["ok"] else float("nan"),
                   p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], p999_ms=r["p999_ms"], max_ms=r["max_ms"],
                   **self.cores(m0, m1))
        self.record(row)
        print("  rep %d  rate=%d %-10s p50 %7.2f  p99 %7.2f  p99.9 %7.2f  max %7.1f ms  errors %d" % (
            rep, rate, name, r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"], r["errors"]), flush=True)

    def cores(self, m0, m1):
        """Core use during a run, and CPU taken by processes that are not ours."""
        a = self.args
        k0, k1 = m0.cores, m1.cores
        wall = m1.t - m0.t
        others = ((m1.total - m0.total) - (m1.driver - m0.driver)) / CLK_TCK
        return dict(client_cpu_s=m1.kids - m0.kids,
                    server_core_busy=core_busy(k0, k1, a.server_core),
                    client_core_busy=core_busy(k0, k1, a.client_core),
                    server_core_irq=core_busy(k0, k1, a.server_core, 2),
                    others_cpu_s=others, others_cores=others / wall if wall > 0 else float("nan"))

    def retry(self, fn, *args):
        for attempt in range(1 + self.args.noise_retries):
            n = len(self.rows)
            fn(*args)
            if len(self.rows) == n or self.rows[-1]["valid"]:
                return
            last = self.rows[-1]
            print("    (noisy: other processes used %.2f cores during the run; %s)" % (
                last["others_cores"],
                "repeating" if attempt < self.args.noise_retries else "kept as invalid"), flush=True)

    def order(self, servers, rep):
        k = (rep - 1) % len(servers)
        return servers[k:] + servers[:k]

    def run(self, servers):
        a = self.args
        if "saturation" in a.phases:
            print("saturation: wrk, closed loop, %d reps x conns %s x %s, %ds each" % (
                a.reps, ",".join(map(str, a.conns)), ",".join(servers), a.duration), flush=True)
            for rep in range(1, a.reps + 1):
                for conns in a.conns:
                    for name in self.order(servers, rep):
                        self.retry(self.one_saturation, rep, name, conns)
        if "latency" in a.phases:
            rate = a.rate or self.default_rate(servers)
            if not rate:
                print("latency: no rate (give --rate or run the saturation phase)")
                return
            self.rate = rate
            print("latency: vegeta, open loop at %d req/s%s, %d reps x %s, %ds each" % (
                rate, "" if a.rate else " (half the slowest server's median capacity)",
                a.reps, ",".join(servers), a.duration), flush=True)
            for rep in range(1, a.reps + 1):
                for name in self.order(servers, rep):
                    self.retry(self.one_latency, rep, name, rate)

    def capacity(self, server):
        """Median rps per conns value; the best conns value is the capacity."""
        best = 0
        for conns in self.args.conns:
            vals = [float(r["rps"]) for r in self.rows if r["phase"] == "saturation" and r["valid"]
                    and r["server"] == server and r["conns"] == conns and r.get("rps") not in (None, "")]
            if vals:
                best = max(best, statistics.median(vals))
        return best

    def default_rate(self, servers):
        caps = [self.capacity(s) for s in servers]
        caps = [c for c in caps if c > 0]
        return int(min(caps) / 2) if caps else 0


# ---------------------------------------------------------------- summary


def med(rows, key):
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "", "nan")]
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else float("nan")


def fmt(v, spec):
    return "–" if v != v else spec % v


def ratio(v, base):
    return "–" if v != v or base != base or base == 0 else "%.2f×" % (v / base)


def pick(rows, **match):
    """Rows of one table cell: the valid ones, or, when every run of the cell
    was noisy, the noisy ones (then flagged †). Returns (rows, label)."""
    cell = [r for r in rows if all(r.get(k) == v for k, v in match.items())
            and r.get("requests") not in (None, "")]
    valid = [r for r in cell if int(r.get("valid", 1))]
    if valid or not cell:
        return valid, "%d/%d" % (len(valid), len(cell))
    return cell, "0/%d †" % len(cell)


def summary(runner, servers, baseline):
    a = runner.args
    rows = runner.rows
    noisy = sum(1 for r in rows if not int(r.get("valid", 1)))
    failed = sum(1 for r in rows if str(r.get("errors")) == "-1")
    lines = ["### %s — %s" % (a.scenario, runner.scen["what"]), "",
             "Medians of %d interleaved repetitions, %ds each; server on core %d, client on core %d. "
             "Ratios are against **%s** in this same run. runs = valid/measured: %d run(s) during which "
             "other processes used over %.2f cores were left out of the medians%s.%s" % (
                 a.reps, a.duration, a.server_core, a.client_core, baseline, noisy, a.noise_max,
                 " (and repeated up to %d times)" % a.noise_retries if a.noise_retries else "",
                 " %d run(s) failed to start." % failed if failed else ""), ""]
    sat = [r for r in rows if r["phase"] == "saturation"]
    if sat:
        lines += ["Saturation (wrk, closed loop):", "",
                  "| server | conns | req/s | vs %s | server CPU µs/req | vs %s | p99 ms (closed loop) | conns served | errors | runs | others (cores) |" % (baseline, baseline),
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for conns in a.conns:
            base, _ = pick(sat, server=baseline, conns=conns)
            b_rps, b_cpu = med(base, "rps"), med(base, "cpu_us_per_req")
            for s in servers:
                good, label = pick(sat, server=s, conns=conns)
                if not good:
                    continue
                errs = sum(int(r["errors"]) for r in good)
                rps, cpu = med(good, "rps"), med(good, "cpu_us_per_req")
                served = med(good, "conns_served")
                lines.append("| %s | %d | %s | %s | %s | %s | %s | %s%s | %d | %s | %s |" % (
                    s, conns, fmt(rps, "%.0f"), ratio(rps, b_rps), fmt(cpu, "%.1f"), ratio(cpu, b_cpu),
                    fmt(med(good, "p99_ms"), "%.2f"), fmt(served, "%.0f"),
                    " ⚠" if served == served and served < conns / 2 else "", errs, label,
                    fmt(med(good, "others_cores"), "%.2f")))
        lines += ["", "conns served = req/s × wrk's mean latency (Little's law): how many connections "
                  "were really in service. ⚠ = under half of conns: the rest waited unserved, which a "
                  "closed-loop req/s hides. wrk's latency excludes connect time, so for a server that "
                  "closes every connection (uwsgi here) the shortfall is time spent in the accept queue. "
                  "Others = median CPU of processes that are neither the server nor the load generator "
                  "during the run, in cores. † = every run of that cell was noisy: medians of the noisy "
                  "runs, not to be quoted.", ""]
    lat = [r for r in rows if r["phase"] == "latency"]
    if lat:
        rate = lat[0]["rate"]
        base, _ = pick(lat, server=baseline)
        lines += ["Latency (vegeta, open loop at %s req/s):" % rate, "",
                  "| server | p50 ms | p99 ms | p99.9 ms | max ms | p99 vs %s | server CPU µs/req | errors | runs | others (cores) |" % baseline,
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for s in servers:
            rs, label = pick(lat, server=s)
            if not rs:
                continue
            errs = sum(int(r["errors"]) for r in rs)
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |" % (
                s, fmt(med(rs, "p50_ms"), "%.2f"), fmt(med(rs, "p99_ms"), "%.2f"),
                fmt(med(rs, "p999_ms"), "%.2f"), fmt(med(rs, "max_ms"), "%.1f"),
                ratio(med(rs, "p99_ms"), med(base, "p99_ms")), fmt(med(rs, "cpu_us_per_req"), "%.1f"),
                errs, label, fmt(med(rs, "others_cores"), "%.2f")))
        lines.append("")
    return "\n".join(lines)


def summarize_file(path, baseline="turnstile"):
    """Rebuild the markdown summary of a recorded run from its CSV (and meta)."""
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        for k in ("conns", "rep", "valid"):
            if r.get(k) not in (None, ""):
                r[k] = int(r[k])
    meta = open(path[:-4] + ".meta.txt").read() if os.path.exists(path[:-4] + ".meta.txt") else ""
    m = re.search(r"server taskset -c (\d+), load generator taskset -c (\d+)", meta)
    nm = re.search(r"others_cores > ([\d.]+) \(repeated up to (\d+)", meta)
    servers = list(dict.fromkeys(r["server"] for r in rows))
    args = argparse.Namespace(
        scenario=rows[0]["scenario"], reps=max(r["rep"] for r in rows),
        duration=int(rows[0]["duration_s"]),
        server_core=int(m.group(1)) if m else 1, client_core=int(m.group(2)) if m else 0,
        conns=sorted({r["conns"] for r in rows if r["phase"] == "saturation"}),
        noise_max=float(nm.group(1)) if nm else 0.10, noise_retries=int(nm.group(2)) if nm else 0)
    runner = argparse.Namespace(args=args, rows=rows, scen=SCENARIOS[args.scenario])
    return summary(runner, servers, baseline if baseline in servers else servers[0])


def bench_name(scenario):
    return "Benchmark" + "".join(p.capitalize() for p in scenario.split("-"))


def write_benchstat(runner, model):
    """One line per run in Go benchmark format, so `benchstat` can compare files."""
    name = bench_name(runner.args.scenario)
    with open(runner.base + ".bench.txt", "w") as f:
        f.write("goos: linux\ngoarch: %s\ncpu: %s\n" % ({"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine), model))
        for r in runner.rows:
            if r.get("requests") in (None, "") or r.get("errors") == -1 or not int(r.get("valid", 1)):
                continue
            if r["phase"] == "saturation":
                f.write("%s/phase=saturation/server=%s/conns=%s 1 %s req/s %s cpu-µs/req %s errors\n" % (
                    name, r["server"], r["conns"], r["rps"], r["cpu_us_per_req"], r["errors"]))
            else:
                f.write("%s/phase=latency/server=%s/rate=%s 1 %s p50-ms %s p99-ms %s p99.9-ms %s max-ms %s cpu-µs/req %s errors\n" % (
                    name, r["server"], r["rate"], r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"],
                    r["cpu_us_per_req"], r["errors"]))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def versions(args, servers):
    v = []
    py = os.path.join(args.venv, "bin", "python")
    v.append("python (venv): %s  [%s]" % (sh([py, "-VV"]), sh([py, "-c", "import sys; print(sys.base_prefix)"])))
    freeze = sh([py, "-m", "pip", "freeze", "--disable-pip-version-check"]).splitlines()
    keep = ("granian", "gunicorn", "uwsgi", "uvicorn", "uvloop", "httptools", "hypercorn",
            "daphne", "django", "flask", "werkzeug", "twisted", "h11")
    v.append("packages: " + ", ".join(l for l in freeze if l.split("==")[0].lower() in keep))
    for s in servers:
        if s == "turnstile":
            v.append("turnstile: %s  (snapshot of %s; repo at start %s)" % (
                sh([args.turnstile_bin, "--version"]) if os.path.exists(args.turnstile_bin) else "missing",
                getattr(args, "turnstile_origin", args.turnstile_bin), args.repo_at_start))
        elif s == "uwsgi":
            v.append("uwsgi: %s, built against %s" % (
                sh([os.path.join(args.venv, "bin", "uwsgi"), "--version"]),
                (re.findall(r"libpython\S+ => (\S+)", sh(["ldd", os.path.join(args.venv, "bin", "uwsgi")])) or ["?"])[0]))
    v.append("wrk: %s (%s)" % (sh([args.wrk, "--version"]).splitlines()[0], sh(["dpkg-query", "-W", "wrk"])))
    vm = [l.split() for l in sh(["go", "version", "-m", args.vegeta]).splitlines()]
    v.append("vegeta: %s, built with %s" % (
        " ".join(next((l[1:3] for l in vm if l and l[0] == "mod"), ["?"])),
        vm[0][1] if vm and len(vm[0]) > 1 else "?"))
    v.append("taskset: %s" % sh(["taskset", "--version"]))
    return v


def write_meta(runner, servers, skipped, load_before, load_after, started, model, summary_md):
    a = runner.args
    gov = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    lines = [
        "scenario: %s — %s" % (a.scenario, runner.scen["what"]),
        "app: bench/apps/%s.py (%s:app), path %s" % (runner.scen["module"], runner.scen["module"], a.path),
        "driver: %s" % shlex.join([sys.executable] + sys.argv),
        "started: %s   finished: %s" % (started, utcnow()),
        "repo: %s" % sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
        "",
        "## machine",
        "nproc: %s" % os.cpu_count(),
        "model name: %s" % model,
        "kernel: %s" % " ".join(os.uname()),
        "os: %s" % sh(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "memory: %s" % sh(["sh", "-c", "grep MemTotal /proc/meminfo"]),
        "cpufreq governor: %s" % (open(gov).read().strip() if os.path.exists(gov) else "n/a (no cpufreq)"),
        "pinning: server taskset -c %d, load generator taskset -c %d" % (a.server_core, a.client_core),
        "loadavg before: %s" % load_before,
        "loadavg after:  %s" % load_after,
        "",
        "## versions",
    ] + versions(a, servers) + [
        "",
        "## method",
        "reps %d (interleaved: each rep runs every server once per conns value, order rotated by one per rep),"
        " duration %ds, warm-up %ds (discarded, same load) before each measured run, fresh server per run" % (
            a.reps, a.duration, a.warmup),
        "saturation conns: %s; latency rate: %s" % (
            ",".join(map(str, a.conns)), getattr(runner, "rate", "n/a")),
        "cpu: utime+stime+cutime+cstime of the server's process tree (/proc/<pid>/stat), after minus before"
        " the measured client run; cpu_us_per_req = that / requests completed (latency phase: / 2xx responses)",
        "server_core_busy / client_core_busy: share of that core busy in user+nice+system+steal during the run (/proc/stat);"
        " server_core_irq: irq+softirq share; others_cpu_s/others_cores: CPU of every process outside this driver's"
        " tree (server + load generator) during the run; valid=0 when others_cores > %.2f (repeated up to %d times)" % (
            a.noise_max, a.noise_retries),
        "",
        "## exact command lines (PORT = a free port chosen per run; cwd %s)" % APPS,
    ] + ["%s: %s" % (k, v) for k, v in runner.commands.items()] + [
        "",
        "skipped: %s" % ("; ".join(skipped) if skipped else "none"),
        "",
        "## summary",
        summary_md,
    ]
    with open(runner.base + ".meta.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


def default_venv():
    ver = sh(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    return os.path.join(WORK, "venv-" + ver)


def main():
    if sys.argv[1:2] == ["summarize"]:
        if len(sys.argv) < 3:
            sys.exit("usage: run.py summarize RESULT.csv [BASELINE]")
        print(summarize_file(sys.argv[2], *sys.argv[3:4]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--servers", help="comma list (default: all for the scenario's interface)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--conns", default="16,64,256", help="wrk connection counts (saturation phase)")
    p.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    p.add_argument("--warmup", type=int, default=1, help="seconds of discarded load before each run")
    p.add_argument("--phases", default="saturation,latency")
    p.add_argument("--rate", type=int, default=0, help="latency phase req/s (default: half the slowest median capacity)")
    p.add_argument("--threads", type=int, default=4, help="Python threads of the one worker process")
    p.add_argument("--path", default="/")
    p.add_argument("--baseline", default="turnstile", help="ratios are against this server")
    p.add_argument("--server-core", type=int, default=1)
    p.add_argument("--client-core", type=int, default=0)
    p.add_argument("--venv", default=os.environ.get("BENCH_VENV") or default_venv())
    p.add_argument("--turnstile-bin", default=os.environ.get("TURNSTILE_BIN") or os.path.join(ROOT, "bin", "turnstile"))
    p.add_argument("--turnstile-args", default="", help="extra turnstile flags, shell-quoted")
    p.add_argument("--wrk", default=shutil.which("wrk") or "wrk")
    p.add_argument("--wrk-timeout", default="5s")
    p.add_argument("--vegeta", default=os.path.join(WORK, "bin", "vegeta"))
    p.add_argument("--quiet", type=float, default=0.25,
                   help="before each run wait until both cores are under this busy fraction for 1 s (0: off)")
    p.add_argument("--quiet-max-wait", type=float, default=60, help="give up waiting for quiet after this many s")
    p.add_argument("--noise-max", type=float, default=0.10,
                   help="a run where other processes used more than this many cores is invalid")
    p.add_argument("--noise-retries", type=int, default=2, help="how often an invalid run is repeated")
    p.add_argument("--start-timeout", type=float, default=30)
    p.add_argument("--out", default=os.path.join(BENCH, "results"), help="results folder (dev runs: bench/work/results)")
    args = p.parse_args()
    args.conns = [int(c) for c in args.conns.split(",") if c]
    args.phases = set(args.phases.split(","))
    scen = SCENARIOS[args.scenario]
    if args.path == "/" and scen.get("path"):
        args.path = scen["path"]  # the scenario's route unless --path says otherwise

    for tool, path in (("wrk", args.wrk), ("vegeta", args.vegeta), ("venv", os.path.join(args.venv, "bin", "python"))):
        if not (shutil.which(path) or os.path.exists(path)):
            sys.exit("run.py: %s not found at %s: run bash bench/setup.sh first" % (tool, path))
    if os.cpu_count() and max(args.server_core, args.client_core) >= os.cpu_count():
        sys.exit("run.py: cores %d/%d do not exist here" % (args.server_core, args.client_core))

    wanted = (args.servers or DEFAULT_SERVERS[scen["interface"]]).split(",")
    servers, skipped = [], []
    for s in wanted:
        if s not in SERVERS:
            sys.exit("run.py: unknown server %r (know %s)" % (s, ", ".join(SERVERS)))
        if scen["interface"] not in SERVERS[s]["interfaces"]:
            skipped.append("%s: does not serve %s" % (s, scen["interface"]))
            continue
        exe = args.turnstile_bin if s == "turnstile" else os.path.join(
            args.venv, "bin", SERVERS[s].get("exe", s))
        if not os.access(exe, os.X_OK):
            why = "%s missing" % exe
            if s == "turnstile":
                why += " (cd %s && make build)" % ROOT
            else:
                why += " (bash bench/setup.sh)"
            skipped.append("%s: %s" % (s, why))
            continue
        servers.append(s)
    for line in skipped:
        print("skip %s" % line)
    if not servers:
        sys.exit("run.py: no server to run")
    baseline = args.baseline if args.baseline in servers else servers[0]
    if baseline != args.baseline:
        print("ratios against %s (%s is not running)" % (baseline, args.baseline))

    if "turnstile" in servers:
        # Others rebuild bin/turnstile while we run: serve every run from one
        # snapshot of it, and record which.
        real = os.path.realpath(args.turnstile_bin)
        snap = os.path.join(WORK, "turnstile-snapshot-%d" % os.getpid())
        shutil.copy2(real, snap)
        with open(snap, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        args.turnstile_origin = "%s -> %s (sha256 %s, modified %s)" % (
            args.turnstile_bin, real, digest[:16],
            datetime.datetime.fromtimestamp(os.path.getmtime(real), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        args.turnstile_bin = snap
    args.repo_at_start = sh(["git", "-C", ROOT, "describe", "--always", "--dirty"])
    model = cpu_model()
    started, load_before = utcnow(), loadavg()
    print("%s: %s; load %s" % (args.scenario, scen["what"], load_before), flush=True)
    runner = Runner(args, scen)
    try:
        runner.run(servers)
    except KeyboardInterrupt:
        print("interrupted: writing what was measured")
    finally:
        runner.csvf.close()
        md = summary(runner, servers, baseline)
        write_meta(runner, servers, skipped, load_before, loadavg(), started, model, md)
        write_benchstat(runner, model)
        if "turnstile" in servers:
            os.unlink(args.turnstile_bin)
    print()
    print(md)
    print("wrote %s.{csv,meta.txt,bench.txt}" % os.path.relpath(runner.base))


if __name__ == "__main__":
    main()
