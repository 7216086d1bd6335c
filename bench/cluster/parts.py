"""bench/cluster/parts.py: what HAProxy and Redis carry per host of
examples/cluster (issue 23, docs/scaling.md "What the balancer and Redis
carry per host"), each part measured alone on loopback.

    make build
    python3 bench/cluster/parts.py --reps 3 [--only http,ws,redis] \\
        [--tunnels 2000,8000] [--subs 0,6,60,600]

Three measurements, each repeated --reps times (the points of a rep
interleaved, their order reversed every other rep); every process's CPU is
its utime+stime (+ reaped children) from /proc/<pid>/stat, in clock ticks.

  http   HAProxy CPU per proxied HTTP request. turnstile `--workers 1
         --proxy-protocol` serving examples/hello (WSGI), behind HAProxy
         running examples/cluster/haproxy.cfg with only its addresses,
         ports and socket substituted (h1 the turnstile; h2 and h3, the
         same address, set MAINT through the runtime API: no traffic, no
         checks), so `send-proxy-v2`, `option httplog` (to a file) and
         keep-alive on both sides are the example's. `wrk -t1 -c32` through
         HAProxy, a 1-s run discarded, then --duration s: HAProxy's and
         turnstile's (master and worker) CPU / requests; wrk's own from its
         rusage. A fresh turnstile and HAProxy per run.
  ws     HAProxy memory per idle WebSocket tunnel and CPU per WebSocket
         connect. The same, turnstile serving bench/apps/ws_app.py (ASGI);
         `ws-load -shape idle -conns N -hold 4s` connects N raw WebSocket
         clients to /echo through HAProxy (64 handshakes in flight) and
         keeps them. HAProxy's VmRSS and open descriptors (/proc/<pid>/fd)
         before the first connect and 1 s after the last: the difference
         / N; its CPU from just before ws-load starts to ws-load's
         "connected" line / N (the TCP accepts on both sides, the upgrade,
         the PROXY header). Fresh turnstile and HAProxy per point (HAProxy
         keeps freed memory in its pools: a second batch would look free).
  redis  Redis CPU per PUBLISH by subscribed connections S. Debian's
         redis-server on 127.0.0.1 (no persistence); S connections
         subscribed to channel "room" held by one process (this file,
         --subscriber: plain sockets, SUBSCRIBE, then read and discard
         everything, counting bytes), `redis-benchmark -n N -c 8 -q PUBLISH
         room <200 B>`; redis-server's CPU over redis-benchmark's run / N.
         N = --publishes (200 000) but at most --deliveries (2.4 M) / S
         publishes, so S=600 takes seconds, not minutes; after each run
         PUBSUB NUMSUB must still say S (no subscriber was cut for its
         output buffer) and the subscriber must have read S x N messages.
         The subscriber shares the machine's cores with Redis: at large S
         its reading competes with Redis's writing.

Nothing is pinned; the machine's other load over each window (others =
busy cores from /proc/stat minus the parts') is in every row. Ports are
free ones picked per run. Everything started (turnstile, HAProxy,
redis-server, the subscriber, ws-load, wrk, redis-benchmark) is stopped at
exit, also on an error, Ctrl-C or SIGTERM.
Results: bench/results/cluster-parts-<UTC>.{csv,md,meta.txt}; logs in
bench/work/cluster-parts-<UTC>/. Python 3 stdlib only; needs haproxy,
redis-server, redis-benchmark, redis-cli, wrk, go.
"""

import argparse
import json
import os
import re
import selectors
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
from common import BENCH, ROOT, R, T, machine_busy

WORK = T.WORK
HOST = "127.0.0.1"
CLK = os.sysconf("SC_CLK_TCK")
HELLO = os.path.join(ROOT, "examples", "hello")
APPS = os.path.join(BENCH, "apps")
PAYLOAD = 200
CHANNEL = "room"
# One published message as a subscriber reads it (RESP2 push of
# "message", channel, payload).
MSG_BYTES = len("*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL, PAYLOAD, "x" * PAYLOAD))

RUNNING = []  # every Popen started here, for the teardown
SERVERS = []  # Turnstile and HAProxy objects not closed yet, for the teardown


# ---------------------------------------------------------------- /proc

def ticks(pid):
    st = R.proc_stat(pid)
    return st[1] if st else None


def tree_ticks(pid):
    """Ticks of pid and its descendants (turnstile's master and workers)."""
    return R.tree_ticks(R.proc_snapshot(), pid)


def vmrss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Mark:
    """CPU ticks of named processes (tree: pid and its descendants) and of
    the machine at one moment."""

    def __init__(self, pids, trees=()):
        self.t = time.time()
        self.busy = machine_busy()
        self.cpu = {k: ticks(p) for k, p in pids.items()}
        self.cpu.update({k: tree_ticks(p) for k, p in dict(trees).items()})


def delta(a, b):
    """({name: CPU seconds}, others' cores, wall seconds) between marks."""
    cpu = {k: (b.cpu[k] - a.cpu[k]) / CLK for k in a.cpu if a.cpu[k] is not None and b.cpu.get(k) is not None}
    wall = b.t - a.t
    return cpu, ((b.busy - a.busy) / CLK - sum(cpu.values())) / wall, wall


# ---------------------------------------------------------------- processes

def spawn(argv, log=None, env=None, cwd=None, stdin=subprocess.DEVNULL, text=True):
    """A Popen in its own session, remembered for the teardown. log: a file
    for stdout+stderr, else both piped."""
    out = log if log is not None else subprocess.PIPE
    p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
                         env=env, cwd=cwd, text=text, start_new_session=True)
    RUNNING.append(p)
    return p


def stop(p, timeout=10):
    """SIGTERM to p's process group, SIGKILL after timeout s; forgotten."""
    if p is None:
        return
    C.term_group(p, timeout)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # workers left in the group
    except (ProcessLookupError, PermissionError):
        pass
    p.wait()
    if p in RUNNING:
        RUNNING.remove(p)


def teardown():
    for srv in list(SERVERS):
        try:
            srv.close()
        except Exception as e:  # noqa: BLE001 - the others go whatever happened
            print("teardown: %r" % e, file=sys.stderr)
    for p in list(RUNNING):
        try:
            stop(p, 5)
        except Exception as e:  # noqa: BLE001 - the others go whatever happened
            print("teardown: %s: %r" % (p.args[0], e), file=sys.stderr)


class Turnstile:
    """turnstile --workers 1 --proxy-protocol on HOST:port, admin on
    HOST:admin, serving target from app_dir."""

    def __init__(self, a, app_dir, target, logdir, name):
        self.port, self.admin = R.free_port(), R.free_port()
        self.argv = [a.turnstile_bin, "--venv", a.venv, "--app-dir", app_dir, "--host", HOST, "--port",
                     str(self.port), "--admin-bind", "%s:%d" % (HOST, self.admin), "--workers", "1",
                     "--proxy-protocol", "--log-level", "warning", target]
        env = R.server_env(a.venv)
        self.log = open(os.path.join(logdir, name + ".log"), "a")
        self.log.write("\n# %s %s\n" % (R.utcnow(), shlex.join(self.argv)))
        self.log.flush()
        self.proc = spawn(self.argv, log=self.log, env=env, cwd=app_dir)
        SERVERS.append(self)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("turnstile exited with %d (%s)" % (self.proc.returncode, self.log.name))
            try:
                with urllib.request.urlopen("http://%s:%d/readyz" % (HOST, self.admin), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("turnstile: /readyz not 200 after 60 s (%s)" % self.log.name)
            time.sleep(0.1)

    def close(self):
        # the workers have process groups of their own: remember them, and
        # SIGKILL whichever outlives the master
        snap = R.proc_snapshot()
        kids, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            for k, (ppid, _) in snap.items():
                if ppid == pid:
                    kids.append(k)
                    todo.append(k)
        stop(self.proc, 15)
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        if self in SERVERS:
            SERVERS.remove(self)


def haproxy_cfg(lb_port, srv_port, admin_port, sock):
    """examples/cluster/haproxy.cfg with loopback addresses and this run's
    ports and socket; nothing else changed."""
    subs = [("bind 10.231.0.1:8080", "bind %s:%d" % (HOST, lb_port)), ("/run/haproxy-cluster.sock", sock),
            ("check port 9191", "check port %d" % admin_port)]
    subs += [("server h%d 10.231.0.1%d:8000" % (i, i), "server h%d %s:%d" % (i, HOST, srv_port)) for i in (1, 2, 3)]
    return C.haproxy_cfg(subs, "bench/cluster/parts.py")


class HAProxy:
    """HAProxy on examples/cluster/haproxy.cfg (haproxy_cfg), h1 UP, h2 and
    h3 MAINT."""

    def __init__(self, srv, logdir):
        self.port = R.free_port()
        self.sock = os.path.join(logdir, "haproxy.sock")
        self.path = os.path.join(logdir, "haproxy.cfg")
        with open(self.path, "w") as f:
            f.write(haproxy_cfg(self.port, srv.port, srv.admin, self.sock))
        self.log = open(os.path.join(logdir, "haproxy.log"), "a")
        self.proc = spawn(["haproxy", "-f", self.path, "-db"], log=self.log)
        SERVERS.append(self)
        C.haproxy_ready(self.proc, self.sock, 1, 2, self.log.name)

    def api(self, cmd):
        return C.haproxy_api(self.sock, cmd, 2)

    def close(self):
        stop(self.proc, 5)
        self.log.close()
        try:
            os.unlink(self.sock)
        except OSError:
            pass
        if self in SERVERS:
            SERVERS.remove(self)


# ---------------------------------------------------------------- http

def http_point(a, logdir, r):
    ts = Turnstile(a, HELLO, "app:app", logdir, "turnstile-hello")
    lb = None
    try:
        lb = HAProxy(ts, logdir)
        url = "http://%s:%d/" % (HOST, lb.port)
        base = ["wrk", "-t1", "-c", str(a.http_conns), "--timeout", "5s", "--latency"]
        warm = spawn(base + ["-d", "1s", url])
        warm.communicate(timeout=60)
        RUNNING.remove(warm)
        argv = base + ["-d", "%ds" % a.duration, url]
        r["cmd"] = shlex.join(argv).replace(str(lb.port), "LB")
        m0 = Mark({"haproxy": lb.proc.pid}, {"turnstile": ts.proc.pid})
        p = spawn(argv)
        _, status, ru = os.wait4(p.pid, 0)  # wrk's own CPU from its rusage
        m1 = Mark({"haproxy": lb.proc.pid}, {"turnstile": ts.proc.pid})
        p.returncode = os.waitstatus_to_exitcode(status)
        out = p.stdout.read()
        RUNNING.remove(p)
        w = R.parse_wrk(out)
        if p.returncode != 0 or not w.get("requests"):
            raise RuntimeError("wrk: rc %d %s" % (p.returncode, out.strip()[-300:]))
        cpu, others, wall = delta(m0, m1)
        cpu["client"] = ru.ru_utime + ru.ru_stime
        n = w["requests"]
        r.update(n=n, wall_s=round(wall, 2), rate=round(w.get("rps", 0)), errors=w["socket_errors"] + w["non2xx"],
                 others_cores=round(others, 2))
        for k in ("haproxy", "turnstile", "client"):
            r[k + "_s"] = round(cpu[k], 3)
            r["us_" + k] = round(cpu[k] / n * 1e6, 2)
    finally:
        if lb:
            lb.close()
        ts.close()


# ---------------------------------------------------------------- ws

def ws_point(a, logdir, r, tunnels):
    ts = Turnstile(a, APPS, "ws_app:app", logdir, "turnstile-ws")
    lb = None
    try:
        lb = HAProxy(ts, logdir)
        hp = lb.proc.pid
        time.sleep(0.5)
        rss0, fd0 = vmrss_kib(hp), nfds(hp)
        argv = [a.ws_load, "-url", "ws://%s:%d" % (HOST, lb.port), "-shape", "idle", "-conns", str(tunnels),
                "-hold", "4s"]
        r["cmd"] = shlex.join(argv).replace(str(lb.port), "LB")
        m0 = Mark({"haproxy": hp}, {"turnstile": ts.proc.pid})
        p = spawn(argv)
        line = p.stderr.readline()  # "connected <ns>", or an error and EOF
        m1 = Mark({"haproxy": hp}, {"turnstile": ts.proc.pid})
        if not line.startswith("connected"):
            p.wait(30)
            raise RuntimeError("ws-load: %s %s" % (line.strip(), p.stderr.read().strip()[-300:]))
        time.sleep(1)
        rss1, fd1 = vmrss_kib(hp), nfds(hp)
        st = lb.api("show info") or ""
        cur = re.search(r"^CurrConns: (\d+)", st, re.M)
        out, err = p.communicate(timeout=60)
        RUNNING.remove(p)
        if p.returncode != 0:
            raise RuntimeError("ws-load rc %d: %s" % (p.returncode, err.strip()[-300:]))
        cpu, others, wall = delta(m0, m1)
        r.update(n=tunnels, wall_s=round(wall, 2), rate=round(tunnels / wall), errors=0,
                 others_cores=round(others, 2), haproxy_conns=int(cur.group(1)) if cur else "",
                 rss_before_kib=rss0, rss_after_kib=rss1, kib_per_tunnel=round((rss1 - rss0) / tunnels, 2),
                 fds_before=fd0, fds_after=fd1, fds_per_tunnel=round((fd1 - fd0) / tunnels, 3))
        for k in ("haproxy", "turnstile"):
            r[k + "_s"] = round(cpu[k], 3)
            r["us_" + k] = round(cpu[k] / tunnels * 1e6, 1)
    finally:
        if lb:
            lb.close()
        ts.close()


# ---------------------------------------------------------------- redis

def subscriber(port, n):
    """--subscriber: n connections SUBSCRIBEd to CHANNEL; prints "ready"
    once every confirmation came, then reads and discards. A line on stdin
    names the bytes to expect: once that many were read (or 20 s after the
    line) prints {"bytes": read after "ready"}, and leaves at stdin's EOF."""
    sel = selectors.DefaultSelector()
    socks = []
    confirm = len("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL))
    for _ in range(n):
        s = socket.create_connection((HOST, port))
        s.sendall(b"SUBSCRIBE %s\r\n" % CHANNEL.encode())
        socks.append(s)
    for s in socks:
        got = b""
        while len(got) < confirm:
            got += s.recv(confirm - len(got))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    print("ready", flush=True)
    total, want, deadline = 0, None, None
    while want is None or (total < want and time.time() < deadline):
        for key, _ in sel.select(1):
            if key.fileobj is sys.stdin:
                line = sys.stdin.readline()
                want, deadline = int(line) if line.strip() else 0, time.time() + 20
                sel.unregister(sys.stdin)
                continue
            try:
                total += len(key.fileobj.recv(1 << 20))
            except BlockingIOError:
                pass
    print(json.dumps({"bytes": total}), flush=True)
    sys.stdin.read()  # subscribed until the driver has asked PUBSUB NUMSUB


def redis_cli(port, *args):
    return C.redis_cli(HOST, port, *args)


def redis_point(a, redis, port, r, subs):
    n = int(min(a.publishes, a.deliveries / subs)) if subs else a.publishes
    sub = None
    if subs:
        sub = spawn([sys.executable, os.path.abspath(__file__), "--subscriber", str(port), str(subs)],
                    stdin=subprocess.PIPE)
        line = sub.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("subscriber: %r %s" % (line, sub.stderr.read()[-300:]))
    got = redis_cli(port, "PUBSUB", "NUMSUB", CHANNEL).split()
    if got[-1:] != [str(subs)]:
        raise RuntimeError("PUBSUB NUMSUB before: %r, want %d" % (got, subs))
    argv = ["redis-benchmark", "-h", HOST, "-p", str(port), "-n", str(n), "-c", "8", "-q",
            "PUBLISH", CHANNEL, "x" * PAYLOAD]
    r["cmd"] = shlex.join(argv[:-1] + ["<%d x>" % PAYLOAD]).replace(str(port), "REDIS")
    pids = {"redis": redis.pid}
    if sub:
        pids["subscriber"] = sub.pid
    m0 = Mark(pids)
    p = spawn(argv)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    delivered = ""
    if sub:
        # Redis may still be writing the deliveries out: its CPU counts
        # until the subscriber has read them all
        sub.stdin.write("%d\n" % (subs * n * MSG_BYTES))
        sub.stdin.flush()
        res = json.loads(sub.stdout.readline() or "{}")
        delivered = res.get("bytes", 0) // MSG_BYTES
    m1 = Mark(pids)
    got = redis_cli(port, "PUBSUB", "NUMSUB", CHANNEL).split()  # before the subscriber leaves
    if sub:
        sub.stdin.close()
        sub.wait(30)
        RUNNING.remove(sub)
    out = p.stdout.read()
    RUNNING.remove(p)
    if p.returncode != 0:
        raise RuntimeError("redis-benchmark rc %d: %s" % (p.returncode, (out + p.stderr.read()).strip()[-300:]))
    cpu, others, wall = delta(m0, m1)
    cpu["client"] = ru.ru_utime + ru.ru_stime
    rate = re.search(r"([\d.]+) requests per second", out)
    r.update(n=n, wall_s=round(wall, 2), rate=round(float(rate.group(1))) if rate else "",
             deliveries=delivered, others_cores=round(others, 2))
    if got[-1:] != [str(subs)] or (subs and delivered != subs * n):
        r["error"] = "after: NUMSUB %r, %s of %d deliveries read" % (got, delivered, subs * n)
    for k in ("redis", "subscriber", "client"):
        if k in cpu:
            r[k + "_s"] = round(cpu[k], 3)
            r["us_" + k] = round(cpu[k] / n * 1e6, 2)
    if subs:
        r["us_redis_per_delivery"] = round(cpu["redis"] / (n * subs) * 1e6, 3)


# ---------------------------------------------------------------- output

KEYS = ["part", "param", "rep", "n", "wall_s", "rate", "errors", "haproxy_s", "turnstile_s", "redis_s",
        "subscriber_s", "client_s", "us_haproxy", "us_turnstile", "us_redis", "us_redis_per_delivery",
        "us_subscriber", "us_client", "deliveries", "haproxy_conns", "rss_before_kib", "rss_after_kib",
        "kib_per_tunnel", "fds_before", "fds_after", "fds_per_tunnel", "others_cores", "loadavg",
        "started_utc", "cmd", "error"]


def summarize(rows):
    def vals(rs, k):
        return [float(x[k]) for x in rs if x.get(k) not in (None, "")]

    def span(rs, k, f="%.1f"):
        v = vals(rs, k)
        if not v:
            return "-"
        return (f + " [" + f + "–" + f + "]") % (statistics.median(v), min(v), max(v))

    ok = [x for x in rows if not x.get("error")]
    out = ["Every figure: median [min–max] over the reps (CPU: utime+stime from /proc, clock ticks of 10 ms); "
           "others = the machine's other load in cores over the window.\n"]
    rs = [x for x in ok if x["part"] == "http"]
    if rs:
        out += ["HTTP through HAProxy (examples/cluster/haproxy.cfg: send-proxy-v2, option httplog, keep-alive "
                "both sides; turnstile --workers 1, examples/hello; wrk -t1 -c%s):\n" % rs[0]["param"],
                "| reps | req/s | HAProxy µs/req | turnstile µs/req | wrk µs/req | others |", "|---|---|---|---|---|---|",
                "| %d | %s | %s | %s | %s | %s |" % (len(rs), span(rs, "rate", "%.0f"), span(rs, "us_haproxy"),
                                                   span(rs, "us_turnstile"), span(rs, "us_client"),
                                                   span(rs, "others_cores", "%.2f")), ""]
    ws = [x for x in ok if x["part"] == "ws"]
    if ws:
        out += ["Idle WebSocket tunnels through HAProxy (ws-load -shape idle to bench/apps/ws_app.py /echo):\n",
                "| tunnels | reps | connects/s | HAProxy KiB/tunnel | HAProxy fds/tunnel | HAProxy µs/connect "
                "| turnstile µs/connect | others |", "|---|---|---|---|---|---|---|---|"]
        for t in sorted({int(x["param"]) for x in ws}):
            rs = [x for x in ws if int(x["param"]) == t]
            out.append("| %d | %d | %s | %s | %s | %s | %s | %s |" % (
                t, len(rs), span(rs, "rate", "%.0f"), span(rs, "kib_per_tunnel", "%.2f"),
                span(rs, "fds_per_tunnel", "%.2f"), span(rs, "us_haproxy"), span(rs, "us_turnstile"),
                span(rs, "others_cores", "%.2f")))
        out.append("")
    rd = [x for x in ok if x["part"] == "redis"]
    if rd:
        out += ["Redis CPU per PUBLISH (%d B) by subscribed connections S (redis-benchmark -c 8):\n" % PAYLOAD,
                "| S | publishes | reps | publishes/s | Redis µs/PUBLISH | Redis µs/delivery | subscriber µs/PUBLISH "
                "| others |", "|---|---|---|---|---|---|---|---|"]
        for s in sorted({int(x["param"]) for x in rd}):
            rs = [x for x in rd if int(x["param"]) == s]
            out.append("| %d | %s | %d | %s | %s | %s | %s | %s |" % (
                s, rs[0]["n"], len(rs), span(rs, "rate", "%.0f"), span(rs, "us_redis", "%.2f"),
                span(rs, "us_redis_per_delivery", "%.3f") if s else "-",
                span(rs, "us_subscriber", "%.2f") if s else "-", span(rs, "others_cores", "%.2f")))
        out.append("")
    errs = ["%s %s rep %s: %s" % (x["part"], x["param"], x["rep"], x["error"]) for x in rows if x.get("error")]
    out.append("Failed points: " + ("; ".join(errs) if errs else "none"))
    return "\n".join(out) + "\n"


def write_results(a, rows, stamp, started, load_before, interrupted, redis_version, tinfo):
    base = os.path.join(a.out, "cluster-parts-%s" % stamp)
    md = summarize(rows)
    C.write_tables(base, KEYS, rows, "cluster-parts " + stamp, md)
    cmds = {}
    for x in rows:
        cmds.setdefault(x["part"], x.get("cmd", ""))
    hello = [a.turnstile_bin, "--venv", a.venv, "--app-dir", HELLO, "--host", HOST, "--port", "PORT", "--admin-bind",
             "%s:ADMIN" % HOST, "--workers", "1", "--proxy-protocol", "--log-level", "warning", "app:app"]
    lines = C.meta_head("what HAProxy and Redis carry per host of examples/cluster (issue 23, docs/scaling.md)",
                        started, interrupted, "none (every part on every core), loopback", load_before) + [
        "", "## versions",
        "python (venv %s): %s" % (a.venv, R.sh([os.path.join(a.venv, "bin", "python"), "-V"])),
        "turnstile: %s" % tinfo,
        "haproxy: %s" % R.sh(["haproxy", "-v"]).splitlines()[0],
        "redis-server: %s" % redis_version,
        "redis-benchmark: %s" % R.sh(["redis-benchmark", "--version"]),
        "wrk: %s" % R.sh(["wrk", "--version"]).splitlines()[0],
        "go (ws-load): %s" % R.sh(["go", "version"]),
        "", "## method",
        "reps %d, the points of a rep interleaved, order reversed every other rep; see bench/cluster/parts.py's "
        "docstring" % a.reps,
        "haproxy: examples/cluster/haproxy.cfg, bind/servers/check port/socket substituted for loopback and this "
        "run's ports, h2 and h3 set MAINT through the runtime API; its per-request log to a file; fresh per point",
        "http: %ds measured after a 1-s wrk run discarded; CPU of HAProxy and turnstile (master+worker) from /proc "
        "over wrk's run, wrk's own from its rusage" % a.duration,
        "ws: HAProxy VmRSS and /proc/<pid>/fd count 0.5 s after it is up and 1 s after the last connect; its CPU "
        "from ws-load's start to its 'connected' line",
        "redis: S connections SUBSCRIBEd to '%s' by one process (parts.py --subscriber); redis-server's CPU over "
        "redis-benchmark's run; publishes = min(%d, %d / S); checked: PUBSUB NUMSUB = S after, S x publishes "
        "messages read (%d B each)" % (CHANNEL, a.publishes, a.deliveries, MSG_BYTES),
        "", "## exact command lines (PORT/ADMIN/LB/REDIS = free ports picked per run)",
        "turnstile (http): %s" % shlex.join(hello),
        "turnstile (ws): %s" % shlex.join(hello[:4] + [APPS] + hello[5:-1] + ["ws_app:app"]),
        "haproxy: haproxy -f <examples/cluster/haproxy.cfg, substituted> -db",
        "redis-server: redis-server --bind %s --port REDIS --save '' --appendonly no --daemonize no "
        "--loglevel warning" % HOST,
        "subscriber: %s --subscriber REDIS S" % shlex.join([sys.executable, os.path.abspath(__file__)]),
    ] + ["%s: %s" % kv for kv in cmds.items()]
    C.write_meta(base, lines, a.note, md)


# ---------------------------------------------------------------- main

def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--subscriber":
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        subscriber(int(sys.argv[2]), int(sys.argv[3]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="http,ws,redis", help="which measurements")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=int, default=6, help="wrk's measured seconds (http)")
    p.add_argument("--http-conns", type=int, default=32)
    p.add_argument("--tunnels", default="2000,8000", help="idle WebSocket tunnels per point (ws)")
    p.add_argument("--subs", default="0,6,60,600", help="subscribed connections per point (redis)")
    p.add_argument("--publishes", type=int, default=200000, help="PUBLISHes per point (redis), at most")
    p.add_argument("--deliveries", type=int, default=2400000, help="publishes x S per point (redis), at most")
    C.add_run_args(p)
    a = p.parse_args()
    only = [x for x in a.only.split(",") if x]
    if set(only) - {"http", "ws", "redis"}:
        raise SystemExit("--only: http, ws, redis")
    C.preflight(("haproxy", "redis-server", "redis-benchmark", "redis-cli", "wrk", "go"), "bench/cluster/parts.py",
                a.venv)

    C.catch_signals()
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    a.ws_load = os.path.join(WORK, "ws-load-parts-%d" % os.getpid())
    subprocess.run(["go", "build", "-o", a.ws_load, "./ws-load"], cwd=BENCH, check=True)
    stamp = T.stamp()
    logdir = os.path.join(WORK, "cluster-parts-%s" % stamp)
    os.makedirs(logdir, exist_ok=True)
    a.turnstile_bin, tinfo = T.snapshot_turnstile(a.turnstile_bin, "-parts")
    started, load_before = R.utcnow(), R.loadavg()
    rows, interrupted, redis_version = [], "", "?"
    redis = None

    def point(part, param, rep, fn, *args):
        r = {"part": part, "param": param, "rep": rep, "loadavg": open("/proc/loadavg").read().split()[0],
             "started_utc": time.strftime("%H:%M:%S", time.gmtime())}
        try:
            fn(*args, r)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            r["error"] = str(e)
        rows.append(r)
        print(json.dumps({k: r[k] for k in KEYS if k in r and k != "cmd"}), flush=True)

    try:
        if "redis" in only:
            rport = R.free_port()
            redis = C.start_redis(HOST, rport, os.path.join(logdir, "redis.log"))
            RUNNING.append(redis)  # for the teardown
            m = re.search(r"redis_version:(\S+)", redis_cli(rport, "INFO", "server"))
            redis_version = m.group(1) if m else "?"
        tunnels = [int(x) for x in a.tunnels.split(",") if x]
        subs = [int(x) for x in a.subs.split(",") if x]
        for rep in range(a.reps):
            flip = (lambda xs: xs) if rep % 2 == 0 else (lambda xs: xs[::-1])
            if "http" in only:
                point("http", a.http_conns, rep, lambda r: http_point(a, logdir, r))
            if "ws" in only:
                for t in flip(tunnels):
                    point("ws", t, rep, lambda r, t=t: ws_point(a, logdir, r, t))
            if "redis" in only:
                for s in flip(subs):
                    point("redis", s, rep, lambda r, s=s: redis_point(a, redis, rport, r, s))
    except BaseException as e:  # Ctrl-C, SIGTERM, a failure: tear down, write what ran
        interrupted = "%s: %s" % (type(e).__name__, e)
        raise
    finally:
        C.ignore_signals()
        teardown()
        for f in (a.turnstile_bin, a.ws_load):
            try:
                os.unlink(f)
            except OSError:
                pass
        if rows:
            write_results(a, rows, stamp, started, load_before, interrupted, redis_version, tinfo)


if __name__ == "__main__":
    main()
