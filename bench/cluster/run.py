"""bench/cluster: the rooms workload through HAProxy on 1, 2 and 3 turnstile
hosts with Redis between them (issue 23), on one machine.

    make build
    python3 bench/cluster/run.py --reps 3 --duration 4 [--hosts 1,2,3] \\
        [--conns 64] [--http-conns 32] [--workers 2]

The cluster is examples/cluster's: each host a network namespace
(examples/cluster/netns.sh: TAGh1..TAGh3 on a bridge, NET.1 the balancer
and Redis, host i at NET.(10+i)), turnstile `--workers N --proxy-protocol
--forwarded-allow-ips NET.1 --admin-bind NET.(10+i):9191` in it, HAProxy
running examples/cluster/haproxy.cfg with only its addresses, port and
socket path substituted (as tests/cluster_parts_test.go does; the
example's own check timings and per-request log, sent to a file), and
Debian's redis-server on NET.1 (TCP, no persistence) started here. For a
point of n hosts the other servers of the backend are put in MAINT through
HAProxy's runtime API (no traffic, no checks); hosts and HAProxy are fresh
for every point, Redis is FLUSHALLed.

The app is bench/apps/rooms_site.py (bench/rooms, issue 21's `--workload
cpu`: no database; a key press runs cpu_work, --cpu-iters rounds of pure
Python) on channels_redis's RedisPubSubChannelLayer (ROOMS_LAYER=pubsub,
the layer examples/cluster chose), ticks the Channels way (a ticker per room
group_sends 6 ticks/s, every member's sync room_tick renders the board).
examples/cluster/rooms_site.py speaks another protocol (JSON texts, no
ticks, no acks), so ws-load -shape game cannot drive it. A room's ticker
runs in one process of the whole cluster: ROOMS_CLOCK_DIR's flock works
across the namespaces (one filesystem), a stand-in for a cluster-wide room
clock.

Per point (rep x host count, the host counts interleaved, their order
reversed every other rep):
  1. WebSocket: ws-load -shape game -conns C through HAProxy (rooms of 4,
     a key every 400 ms per client). Delivered tick frames/s, key round
     trip p50/p95/p99, and every part's CPU over ws-load's measured window
     (/proc, sampled every 0.25 s): the turnstile hosts (every process in
     their namespaces), haproxy, redis-server, ws-load. Per delivered
     message = CPU seconds / (tick frames + key acks delivered in the
     window).
  2. HTTP, the WebSocket clients gone: wrk -t1 -c H through HAProxy to GET
     / (a sync Django view), --warmup s discarded, then --duration s: req/s,
     errors, latency, every part's CPU per request (wrk's own from its
     rusage).
HAProxy's `show stat` gives the sessions per host (stot) of each phase: the
clients landed on every host.

The namespaces share this machine's cores (2 here): more hosts do not
bring more CPU, so the rates are no scaling curve. Read the CPU per
delivered message and per request: what each host count costs for the
same work. Nothing is pinned (every part on every core). The machine's
other load over each phase (others = busy cores from /proc/stat minus the
parts') is in every row.

Everything is torn down at exit, also on an error, Ctrl-C or SIGTERM:
ws-load/wrk, HAProxy, the hosts (SIGTERM to the master, then SIGKILL to
whatever still runs in the namespace), Redis, the namespaces.
Results: bench/results/cluster-<UTC>.{csv,md,meta.txt}; logs in
bench/work/cluster-<UTC>/. Python 3 stdlib only; needs root, ip, haproxy,
redis-server, wrk, go.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import common as C  # bench/cluster/common.py, beside this file
from common import BENCH, EXAMPLE, R, T, machine_busy

WORK = T.WORK
APPS = os.path.join(BENCH, "apps")
CLK = os.sysconf("SC_CLK_TCK")
TARGET = "rooms_site:application"
HOST_PORT, ADMIN_PORT = 8000, 9191
PARTS = ("hosts", "haproxy", "redis", "client")
NOMINAL_TICKS = 6.0


# ---------------------------------------------------------------- /proc

def pid_ticks(pid):
    """utime+stime+cutime+cstime of pid (clock ticks), None if gone."""
    st = R.proc_stat(pid)
    return st[1] if st else None


def snapshot(parts):
    """(wall, {part: {pid: ticks}}, machine busy ticks)."""
    return (time.time(), {p: {pid: t for pid in pids if (t := pid_ticks(pid)) is not None}
                          for p, pids in parts.items()}, machine_busy())


def usage(a, b):
    """CPU seconds per part between two snapshots (pids present in both),
    the machine's busy CPU seconds and the wall seconds."""
    cpu = {p: sum(b[1][p][pid] - a[1][p][pid] for pid in b[1].get(p, {}) if pid in a[1].get(p, {})) / CLK
           for p in b[1]}
    return cpu, (b[2] - a[2]) / CLK, b[0] - a[0]


class Sampler(threading.Thread):
    """snapshot(parts) every 0.25 s; parts (a dict of pid lists) may gain
    pids while it runs (ws-load's, once started)."""

    def __init__(self, parts):
        super().__init__(daemon=True)
        self.parts, self.samples, self.stop_ev = parts, [], threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            self.samples.append(snapshot({p: list(v) for p, v in self.parts.items()}))
            self.stop_ev.wait(0.25)

    def stop(self):
        self.stop_ev.set()
        self.join()

    def window(self, t0, t1):
        """({part: CPU seconds} over [t0, t1] (between the first and last
        samples inside it, scaled to its length; "h1".. each host's),
        the others' cores); None with fewer than two samples."""
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if len(s) < 2:
            return None
        cpu, busy, dt = usage(s[0], s[-1])
        ours = sum(cpu[p] for p in PARTS)
        return {k: v * (t1 - t0) / dt for k, v in cpu.items()}, (busy - ours) / dt


# ---------------------------------------------------------------- the cluster

def sh(cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check).stdout


def free_octet():
    """A third octet for 10.231.X.0/24 that no interface has (the cluster
    test picks from 20-219 by its pid; this from 220-254 first)."""
    have = sh(["ip", "-4", "-o", "addr"])
    for o in list(range(220, 255)) + list(range(20, 220)):
        if " 10.231.%d." % o not in have:
            return o
    raise SystemExit("no free 10.231.X.0/24")


def free_port(addr):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def ns_pids(ns):
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


class Cluster:
    """The namespaces, Redis, the hosts and HAProxy of one bench run;
    close() tears down whatever exists (safe to call twice)."""

    def __init__(self, a, logdir):
        self.a, self.logdir = a, logdir
        self.tag = "tsb%d" % (os.getpid() % 100000)
        self.net = "10.231.%d" % free_octet()
        self.lb_addr = self.net + ".1"
        self.hosts = {}        # i -> (Popen, log file)
        self.haproxy = None    # (Popen, log file)
        self.redis = None
        self.netns_up = False
        self.sock = os.path.join(logdir, "haproxy.sock")
        self.clock_dir = os.path.join(logdir, "clocks")
        os.makedirs(self.clock_dir, exist_ok=True)

    def ns(self, i):
        return "%sh%d" % (self.tag, i)

    def addr(self, i):
        return "%s.%d" % (self.net, 10 + i)

    def up(self):
        self.netns_up = True  # a half-made set is removed by down too
        subprocess.run([os.path.join(EXAMPLE, "netns.sh"), "up", self.tag, self.net, "3"], check=True,
                       capture_output=True)
        self.redis_port = free_port(self.lb_addr)
        self.redis = C.start_redis(self.lb_addr, self.redis_port, os.path.join(self.logdir, "redis.log"),
                                   ("--protected-mode", "no"))
        self.redis_info = self.redis_cli("INFO", "server")

    def redis_cli(self, *args):
        return C.redis_cli(self.lb_addr, self.redis_port, *args)

    def host_argv(self, i):
        return ["ip", "netns", "exec", self.ns(i), self.a.turnstile_bin, "--venv", self.a.venv,
                "--app-dir", APPS, "--host", self.addr(i), "--port", str(HOST_PORT),
                "--admin-bind", "%s:%d" % (self.addr(i), ADMIN_PORT), "--workers", str(self.a.workers),
                "--proxy-protocol", "--forwarded-allow-ips", self.lb_addr, "--log-level", "warning", TARGET]

    def host_env(self, i):
        return {"ROOMS_LAYER": "pubsub", "ROOMS_REDIS": "redis://%s:%d/0" % (self.lb_addr, self.redis_port),
                "ROOMS_TICKS": "channels", "ROOMS_WORK": "cpu", "ROOMS_CPU_ITERS": str(self.a.cpu_iters),
                "ROOMS_CLOCK_DIR": self.clock_dir}

    def start_hosts(self, n, stamp):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ROOMS_"))}
        env.update(VIRTUAL_ENV=self.a.venv, PYTHONPATH=APPS,
                   PATH=os.path.join(self.a.venv, "bin") + os.pathsep + env.get("PATH", ""))
        for i in range(1, n + 1):
            env_i = dict(env, **self.host_env(i))
            log = open(os.path.join(self.logdir, "h%d.log" % i), "ab")
            log.write(("\n# %s n=%d\n" % (stamp, n)).encode())
            log.flush()
            # ip netns exec execs turnstile: the Popen's pid is the master's
            self.hosts[i] = (subprocess.Popen(self.host_argv(i), cwd=APPS, env=env_i, stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log)
        deadline = time.time() + 90
        for i, (proc, _) in self.hosts.items():
            url = "http://%s:%d/readyz" % (self.addr(i), ADMIN_PORT)
            while True:
                if proc.poll() is not None:
                    raise RuntimeError("host h%d exited with %d (%s/h%d.log)" % (i, proc.returncode, self.logdir, i))
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.time() > deadline:
                    raise RuntimeError("host h%d: /readyz not 200 after 90 s" % i)
                time.sleep(0.2)

    def stop_hosts(self):
        for i, (proc, log) in list(self.hosts.items()):
            C.term_group(proc, 15)
            # the workers have process groups of their own: whatever still
            # runs in the namespace is one of ours
            for pid in ns_pids(self.ns(i)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.close()
            del self.hosts[i]

    def haproxy_cfg(self):
        """examples/cluster/haproxy.cfg with this run's addresses, port and
        socket (tests/cluster_parts_test.go's substitutions but the check
        timings)."""
        self.lb_port = free_port(self.lb_addr)
        cfg = C.haproxy_cfg((("bind 10.231.0.1:8080", "bind %s:%d" % (self.lb_addr, self.lb_port)),
                             ("/run/haproxy-cluster.sock", self.sock), ("10.231.0.", self.net + ".")),
                            "bench/cluster/run.py")
        path = os.path.join(self.logdir, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(cfg)
        return path

    def start_haproxy(self, n):
        path = self.haproxy_cfg()
        # the example logs every request to stdout: to a file, one per point
        log = open(os.path.join(self.logdir, "haproxy.log"), "wb")
        self.haproxy = (subprocess.Popen(["haproxy", "-f", path, "-db"], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True), log)
        # the hosts not in this point: MAINT, no traffic, no checks
        C.haproxy_ready(self.haproxy[0], self.sock, n, 5, log.name)

    def stop_haproxy(self):
        if self.haproxy:
            proc, log = self.haproxy
            T.stop_proc(proc, 5)
            log.close()
            self.haproxy = None

    def stop_redis(self):
        if self.redis is not None:
            T.stop_proc(self.redis, 10)
            self.redis = None

    def stat(self):
        """{server: {column: value}} of the backend's servers (show stat)."""
        return C.haproxy_stat(self.sock, 5)

    def stot(self):
        return {h: int(v.get("stot") or 0) for h, v in self.stat().items()}

    def parts(self, n):
        p = {"hosts": [pid for i in range(1, n + 1) for pid in ns_pids(self.ns(i))],
             "haproxy": [self.haproxy[0].pid], "redis": [self.redis.pid], "client": []}
        for i in range(1, n + 1):
            p["h%d" % i] = ns_pids(self.ns(i))
        return p

    def close(self):
        for step in (self.stop_haproxy, self.stop_hosts, self.stop_redis):
            try:
                step()
            except Exception as e:  # noqa: BLE001 - the namespaces go whatever happened
                print("teardown: %s: %r" % (step.__name__, e), file=sys.stderr)
        if self.netns_up:
            for i in range(1, 4):  # anything left in a namespace (a host started by hand)
                for pid in ns_pids(self.ns(i)):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            subprocess.run([os.path.join(EXAMPLE, "netns.sh"), "down", self.tag, self.net, "3"], capture_output=True)
            self.netns_up = False
        subprocess.run(["rm", "-rf", self.clock_dir])
        for f in (self.sock,):
            try:
                os.unlink(f)
            except OSError:
                pass


# ---------------------------------------------------------------- one point

RUNNING = []  # ws-load / wrk while they run, for the teardown


def spawn(argv):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    RUNNING.append(p)
    return p


def reap(p, timeout):
    """p.communicate(): (stdout, stderr, returncode). Interrupted, p stays
    in RUNNING for main's teardown to kill."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        RUNNING.remove(p)
        raise RuntimeError("%s: no result after %g s" % (os.path.basename(p.args[0]), timeout))
    RUNNING.remove(p)
    return out, err, p.returncode


def ws_phase(a, c, n, r):
    parts = c.parts(n)
    samp = Sampler(parts)
    samp.start()
    argv = [a.ws_load, "-url", "ws://%s:%d" % (c.lb_addr, c.lb_port), "-shape", "game", "-conns", str(a.conns),
            "-duration", "%gs" % a.duration, "-warmup", "%gs" % a.warmup, "-json", "-name", "h%d" % n]
    r["ws_cmd"] = shlex.join(argv)
    s0 = c.stot()
    p = spawn(argv)
    parts["client"].append(p.pid)
    try:
        out, err, rc = reap(p, a.duration * 4 + 120)
    finally:
        samp.stop()
    s1 = c.stot()
    r["ws_sessions"] = "/".join(str(s1.get("h%d" % i, 0) - s0.get("h%d" % i, 0)) for i in range(1, n + 1))
    if rc != 0:
        raise RuntimeError("ws-load: " + (err or out).strip()[-300:])
    w = json.loads(out)
    r.update(ticks=w.get("ticks", 0), acks=w.get("messages", 0), keys=w.get("keys", 0),
             keys_lost=w.get("keys_lost", 0), ws_errors=w.get("errors", 0), ticks_per_client_s=w.get("ticks_per_client_s", 0),
             p50_ms=w.get("p50_ms"), p95_ms=w.get("p95_ms"), p99_ms=w.get("p99_ms"))
    r["ticks_per_s"] = round(r["ticks"] / a.duration, 1)
    m = re.search(r"window (\d+) (\d+)", err)
    got = samp.window(int(m.group(1)) / 1e9, int(m.group(2)) / 1e9) if m else None
    if not got:
        raise RuntimeError("no CPU samples in ws-load's window")
    cpu, others = got
    msgs = r["ticks"] + r["acks"]
    for part in PARTS:
        r["ws_%s_s" % part] = round(cpu[part], 3)
        r["ws_us_msg_%s" % part] = round(cpu[part] / msgs * 1e6, 1) if msgs else ""
    total = sum(cpu[p] for p in PARTS)
    r["ws_us_msg_total"] = round(total / msgs * 1e6, 1) if msgs else ""
    r["ws_us_tick_total"] = round(total / r["ticks"] * 1e6, 1) if r["ticks"] else ""
    r["ws_host_cores"] = "/".join("%.2f" % (cpu["h%d" % i] / a.duration) for i in range(1, n + 1))
    r["ws_others_cores"] = round(others, 2)


def http_phase(a, c, n, r):
    url = "http://%s:%d/" % (c.lb_addr, c.lb_port)
    base = ["wrk", "-t1", "-c", str(a.http_conns), "--timeout", "5s", "--latency"]
    warm = spawn(base + ["-d", "%ds" % max(1, round(a.warmup)), url])
    reap(warm, a.warmup + 60)
    argv = base + ["-d", "%ds" % round(a.duration), url]
    r["http_cmd"] = shlex.join(argv)
    parts = c.parts(n)
    s0 = c.stot()
    k0 = snapshot(parts)
    p = spawn(argv)
    _, status, ru = os.wait4(p.pid, 0)  # wrk's own CPU from its rusage
    k1 = snapshot(parts)
    p.returncode = os.waitstatus_to_exitcode(status)
    out, err, rc = reap(p, 10)
    s1 = c.stot()
    cpu, busy, dt = usage(k0, k1)
    cpu["client"] = ru.ru_utime + ru.ru_stime
    w = R.parse_wrk(out)
    if rc != 0 or not w.get("requests"):
        raise RuntimeError("wrk: rc %d %s" % (rc, (err or out).strip()[-300:]))
    reqs = w["requests"]
    r.update(http_requests=reqs, http_rps=round(w.get("rps", 0)), http_errors=w["socket_errors"] + w["non2xx"],
             http_p50_ms=w.get("p50_ms"), http_p99_ms=w.get("p99_ms"))
    for part in PARTS:
        r["http_%s_s" % part] = round(cpu[part], 3)
        r["http_us_req_%s" % part] = round(cpu[part] / reqs * 1e6, 1)
    ours = sum(cpu[p] for p in PARTS)
    r["http_us_req_total"] = round(ours / reqs * 1e6, 1)
    r["http_host_cores"] = "/".join("%.2f" % (cpu["h%d" % i] / dt) for i in range(1, n + 1))
    r["http_sessions"] = "/".join(str(s1.get("h%d" % i, 0) - s0.get("h%d" % i, 0)) for i in range(1, n + 1))
    r["http_others_cores"] = round((busy - ours) / dt, 2)


def one_point(a, c, n, rep, stamp):
    r = {"hosts": n, "rep": rep, "workers": a.workers, "conns": a.conns, "http_conns": a.http_conns,
         "loadavg": open("/proc/loadavg").read().split()[0],
         "started_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")}
    try:
        c.redis_cli("FLUSHALL")
        c.start_hosts(n, stamp)
        c.start_haproxy(n)
        ws_phase(a, c, n, r)
        http_phase(a, c, n, r)
    except RuntimeError as e:
        r["error"] = str(e)
    finally:
        c.stop_haproxy()
        c.stop_hosts()
    return r


# ---------------------------------------------------------------- output

KEYS = ["hosts", "rep", "workers", "conns", "ticks", "ticks_per_s", "ticks_per_client_s", "acks", "keys",
        "keys_lost", "ws_errors", "p50_ms", "p95_ms", "p99_ms"] + \
       ["ws_%s_s" % p for p in PARTS] + ["ws_us_msg_%s" % p for p in PARTS] + \
       ["ws_us_msg_total", "ws_us_tick_total", "ws_host_cores", "ws_sessions", "ws_others_cores",
        "http_conns", "http_requests", "http_rps", "http_errors", "http_p50_ms", "http_p99_ms"] + \
       ["http_%s_s" % p for p in PARTS] + ["http_us_req_%s" % p for p in PARTS] + \
       ["http_us_req_total", "http_host_cores", "http_sessions", "http_others_cores", "loadavg", "started_utc",
        "error"]


def summarize(rows, hosts):
    def med(rs, k):
        v = [float(x[k]) for x in rs if x.get(k) not in (None, "")]
        return statistics.median(v) if v else float("nan")

    out = ["The hosts are network namespaces on one machine and share its %d cores: more hosts bring no "
           "more CPU, so the rates below are no scaling curve. Read the CPU per delivered message and per "
           "request (µs, every part's utime+stime from /proc): what the same work costs on 1, 2 and 3 hosts. "
           "Medians over reps; others = the machine's other load in cores over the phase.\n" % os.cpu_count(),
           "WebSocket (ws-load -shape game, rooms of 4, 6 ticks/s per room, a key per client every 400 ms; "
           "message = tick frame or key ack delivered in the window):\n",
           "| hosts | ticks/s | ticks/c/s | key p50 ms | key p95 ms | µs/msg hosts | haproxy | redis | client "
           "| total | µs/tick total | sessions per host | others | ok |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in hosts:
        rs = [x for x in rows if int(x["hosts"]) == n and not x.get("error")]
        nall = len([x for x in rows if int(x["hosts"]) == n])
        if not rs:
            out.append("| %d | failed |||||||||||| 0/%d |" % (n, nall))
            continue
        out.append("| %d | %.0f | %.2f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.2f | %d/%d |" % (
            n, med(rs, "ticks_per_s"), med(rs, "ticks_per_client_s"), med(rs, "p50_ms"), med(rs, "p95_ms"),
            med(rs, "ws_us_msg_hosts"), med(rs, "ws_us_msg_haproxy"), med(rs, "ws_us_msg_redis"),
            med(rs, "ws_us_msg_client"), med(rs, "ws_us_msg_total"), med(rs, "ws_us_tick_total"),
            rs[0]["ws_sessions"], med(rs, "ws_others_cores"), len(rs), nall))
    out += ["\nHTTP (wrk through HAProxy, GET / a sync Django view):\n",
            "| hosts | req/s | errors | p50 ms | p99 ms | µs/req hosts | haproxy | redis | client | total "
            "| requests per host | others |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in hosts:
        rs = [x for x in rows if int(x["hosts"]) == n and not x.get("error")]
        if not rs:
            out.append("| %d | failed |||||||||||" % n)
            continue
        out.append("| %d | %.0f | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %.2f |" % (
            n, med(rs, "http_rps"), med(rs, "http_errors"), med(rs, "http_p50_ms"), med(rs, "http_p99_ms"),
            med(rs, "http_us_req_hosts"), med(rs, "http_us_req_haproxy"), med(rs, "http_us_req_redis"),
            med(rs, "http_us_req_client"), med(rs, "http_us_req_total"), rs[0]["http_sessions"],
            med(rs, "http_others_cores")))
    errs = ["hosts %s rep %s: %s" % (x["hosts"], x["rep"], x["error"]) for x in rows if x.get("error")]
    out.append("\nFailed points: " + ("; ".join(errs) if errs else "none") + "\n")
    return "\n".join(out) + "\n"


def redis_version(c):
    m = re.search(r"redis_version:(\S+)", getattr(c, "redis_info", ""))
    return m.group(1) if m else "?"


def tool_versions(a):
    code = ("import importlib.metadata as m\nfor n in ['Django','channels','channels-redis','redis','asgiref',"
            "'msgpack']:\n try: print(n+'=='+m.version(n),end=' ')\n except Exception: pass")
    return [
        "python (venv %s): %s; %s" % (a.venv, R.sh([os.path.join(a.venv, "bin", "python"), "-V"]),
                                      subprocess.run([os.path.join(a.venv, "bin", "python"), "-c", code],
                                                     capture_output=True, text=True).stdout.strip()),
        "turnstile: %s" % a.turnstile_info,
        "haproxy: %s" % R.sh(["haproxy", "-v"]).splitlines()[0],
        "redis-server: %s" % R.sh(["redis-server", "--version"]),
        "wrk: %s" % R.sh(["wrk", "--version"]).splitlines()[0],
        "go (ws-load): %s" % R.sh(["go", "version"]),
        "iproute2: %s" % R.sh(["ip", "-V"]),
    ]


def write_results(a, rows, hosts, stamp, c, started, load_before, interrupted):
    base = os.path.join(a.out, "cluster-%s" % stamp)
    md = summarize(rows, hosts)
    C.write_tables(base, KEYS, rows, "cluster " + stamp, md)
    ws_cmd = next((x["ws_cmd"] for x in rows if x.get("ws_cmd")), "")
    http_cmd = next((x["http_cmd"] for x in rows if x.get("http_cmd")), "")
    lines = C.meta_head("the rooms workload through HAProxy on %s hosts (issue 23)" % ",".join(map(str, hosts)),
                        started, interrupted, "none (hosts, HAProxy, Redis and the clients share every core)",
                        load_before) + [
        "", "## versions"] + tool_versions(a) + [
        "", "## method",
        "reps %d, host counts interleaved (order reversed every other rep), %gs measured after %gs warm-up "
        "per phase; a fresh cluster of n hosts and HAProxy per point" % (a.reps, a.duration, a.warmup),
        "hosts: network namespaces %sh1..3 (examples/cluster/netns.sh), net %s.0/24; turnstile --workers %d each"
        % (c.tag, c.net, a.workers),
        "app: bench/apps/rooms_site.py, ROOMS_LAYER=pubsub (channels_redis RedisPubSubChannelLayer), "
        "ROOMS_TICKS=channels, ROOMS_WORK=cpu (%d rounds a key), one ticker per room across the cluster "
        "(ROOMS_CLOCK_DIR flock, one filesystem)" % a.cpu_iters,
        "haproxy: examples/cluster/haproxy.cfg, addresses/port/socket substituted, absent hosts set MAINT "
        "through the runtime API; its per-request log to a file",
        "redis: %s (Debian's redis-server) on %s TCP, no persistence, FLUSHALL before each point"
        % (redis_version(c), c.lb_addr),
        "CPU: utime+stime(+reaped children) of every process of each part from /proc; hosts = every process "
        "in the hosts' namespaces; WebSocket over ws-load's window (samples every 0.25 s), HTTP over wrk's run "
        "(wrk's own from its rusage); others = /proc/stat busy minus the parts",
        "", "## exact command lines (LB/REDIS = this run's ports, NET = %s)" % c.net,
        ("host i: %s %s" % (" ".join("%s=%s" % kv for kv in sorted(c.host_env(1).items())),
                            shlex.join(c.host_argv(1)))).replace(c.ns(1), c.tag + "hI").replace(c.addr(1), "NET.1I")
        .replace(c.net + ".", "NET."),
        "haproxy: haproxy -f <substituted haproxy.cfg> -db",
        "ws-load: %s" % ws_cmd,
        "wrk: %s" % http_cmd,
    ]
    C.write_meta(base, lines, a.note, md)


# ---------------------------------------------------------------- main

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", default="1,2,3", help="host counts (1-3)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=4, help="measured seconds per phase")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds of load before measuring, per phase")
    p.add_argument("--conns", type=int, default=64, help="WebSocket clients (rooms of 4)")
    p.add_argument("--http-conns", type=int, default=32, help="wrk's connections")
    p.add_argument("--workers", type=int, default=2, help="turnstile --workers per host (the example's 2)")
    p.add_argument("--cpu-iters", type=int, default=3000, help="rooms_site.cpu_work's rounds per key press")
    C.add_run_args(p)
    p.add_argument("--summarize", metavar="CSV", help="only rewrite CSV's .md from its rows")
    a = p.parse_args()
    hosts = [int(x) for x in a.hosts.split(",") if x]
    if not hosts or any(not 1 <= n <= 3 for n in hosts):
        raise SystemExit("--hosts: counts from 1 to 3 (examples/cluster/haproxy.cfg has three servers)")
    if a.summarize:
        rows = list(csv.DictReader(open(a.summarize)))
        base = a.summarize[:-len(".csv")]
        with open(base + ".md", "w") as f:
            f.write("# cluster %s\n\n%s" % (os.path.basename(base)[len("cluster-"):],
                                           summarize(rows, sorted({int(x["hosts"]) for x in rows}))))
        return
    if os.geteuid() != 0:
        raise SystemExit("bench/cluster needs root (network namespaces)")
    C.preflight(("ip", "haproxy", "redis-server", "redis-cli", "wrk", "go"), "bench/cluster", a.venv)

    C.catch_signals()
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    a.ws_load = os.path.join(WORK, "ws-load")
    subprocess.run(["go", "build", "-o", a.ws_load, "./ws-load"], cwd=BENCH, check=True)
    stamp = T.stamp()
    logdir = os.path.join(WORK, "cluster-%s" % stamp)
    os.makedirs(logdir, exist_ok=True)
    a.turnstile_bin, a.turnstile_info = T.snapshot_turnstile(a.turnstile_bin, "-cluster")
    started, load_before = R.utcnow(), R.loadavg()
    c = Cluster(a, logdir)
    rows, interrupted = [], ""
    try:
        c.up()
        for rep in range(a.reps):
            for n in (hosts if rep % 2 == 0 else hosts[::-1]):
                r = one_point(a, c, n, rep, stamp)
                rows.append(r)
                print(json.dumps({k: r[k] for k in KEYS if k in r}), flush=True)
    except BaseException as e:  # Ctrl-C, SIGTERM, a failure: tear down, write what ran
        interrupted = "%s: %s" % (type(e).__name__, e)
        raise
    finally:
        C.ignore_signals()
        for proc in list(RUNNING):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        c.close()
        os.unlink(a.turnstile_bin)
        if rows:
            write_results(a, rows, hosts, stamp, c, started, load_before, interrupted)


if __name__ == "__main__":
    main()
