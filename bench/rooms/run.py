"""bench/rooms: the rooms workload of issue 20 (a LiveView game shaped like
djust's snake-arena) on turnstile and its ASGI peers.

    bash bench/setup.sh && make build
    python3 bench/rooms/run.py --reps 3 --duration 4 \\
        --servers turnstile-on,turnstile-off,uvicorn,daphne,granian,hypercorn

The app is bench/apps/rooms_site.py (a Channels sync WebsocketConsumer,
rooms of 4, a per-room tick of 6 frames/s rendered from a Django template
by every member's sync handler; each key press an ORM INSERT + COMMIT to
PostgreSQL, then the board rendered and acked). The client is ws-load
-shape game (bench/ws-load): a key every 400 ms per client.

PostgreSQL: a throwaway cluster started by bench/rooms/pg.sh in
bench/work/pg-rooms (ext4: commits wait for fsync), on the client core,
rooms_move truncated before every run; stopped at the end.

Per rep, for each level (the --conns, then the blocker arm: --block-conns
clients, client 0 stalls its handler 200 ms once a second and is left out
of the figures), every server in turn (interleaved), one process each,
freshly started for each run (an overloaded run leaves queued work behind),
under `taskset -c 1` (ws-load and PostgreSQL on core 0). Sampled every 0.25 s over ws-load's measured window: the
server tree's CPU, its loop thread's (ts-loop-0 under turnstile, the main
thread of the busiest process otherwise), that process's VmRSS, VmHWM and
Threads.

"Holds" = tick frames/client/s >= 0.95 x 6 and key p95 < 100 ms.
Results: bench/results/rooms-<UTC>.{csv,md,meta.txt}. Python 3 stdlib only.

Issue 21 (a Channels layer held by Go, across workers):

    python3 bench/rooms/run.py --workload cpu --reps 3 --duration 4 \\
        --conns 64,128,192,256,320,384 --block-conns 0 \\
        --servers turnstile-memory,turnstile-layer-w1,turnstile-layer-gs-w1,uvicorn-redis-w1,\\
turnstile-layer-w2,turnstile-layer-gs-w2,uvicorn-redis-w2,uvicorn-pubsub-w2,uvicorn-memory

--workload cpu: no PostgreSQL; a key press runs rooms_site.cpu_work
(--cpu-iters rounds of pure-Python arithmetic, the GIL held; its cost per
call is in the meta). Arms <server>-<layer>[-w<N>] (ARM below): turnstile
--workers N or uvicorn --workers N with the layer "layer" (turnstile's,
ticks by group_send_frames: rendered once, written by Go), "layer-gs"
(turnstile's, ticks by group_send as the Channels way), "redis"
(channels_redis RedisChannelLayer), "pubsub" (RedisPubSubChannelLayer) or
"memory" (InMemoryChannelLayer, one process). One-worker arms on
--server-core (1), several-worker arms on --server-cores (0,1: both, ws-load
stays on core 0 too). Redis: Debian's redis-server, started here on a unix
socket in bench/work/redis-rooms, moved onto the arm's cores before each
run, its CPU counted (Redis CPU) and stopped at the end. A room's ticker
runs in one worker (ROOMS_CLOCK_DIR, a flock per room). us/tick = CPU
seconds of the server tree + Redis over the window / tick frames delivered.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import turnlib as T  # noqa: E402
ROOT = os.path.dirname(BENCH)
APPS = os.path.join(BENCH, "apps")
WORK = os.path.join(BENCH, "work")
HOST = "127.0.0.1"
PORT = 8792
TARGET = "rooms_site:application"
CLK = os.sysconf("SC_CLK_TCK")
NOMINAL_TICKS = 6.0


# Issue 21's arms: <server>-<layer>[-w<workers>], server turnstile or
# uvicorn. Layers: "layer" = turnstile.channels.ChannelLayer with the ticks
# by fan-out (group_send_frames), "layer-gs" = the same layer with the ticks
# the Channels way (group_send, each member's room_tick), "redis" =
# channels_redis's RedisChannelLayer, "pubsub" = its RedisPubSubChannelLayer,
# "memory" = Channels' InMemoryChannelLayer (one process only).
ARM = re.compile(r"^(turnstile|uvicorn)-(layer-gs|layer|redis|pubsub|memory)(?:-w(\d+))?$")
ARM_LAYER = {"layer": ("turnstile", "fanout"), "layer-gs": ("turnstile", "channels"),
             "redis": ("redis", "channels"), "pubsub": ("pubsub", "channels"), "memory": ("memory", "channels")}


def arm_of(name):
    """(server, ROOMS_LAYER, ROOMS_TICKS, workers) of an issue-21 arm name,
    (None, "memory", "channels", 1) for issue 20's arms."""
    m = ARM.match(name)
    if not m:
        return None, "memory", "channels", 1
    server, layer, w = m.group(1), m.group(2), int(m.group(3) or 1)
    if server == "uvicorn" and layer.startswith("layer"):
        raise SystemExit("%s: turnstile's layer runs only inside turnstile" % name)
    if layer == "memory" and w != 1:
        raise SystemExit("%s: an in-memory layer serves one process" % name)
    return (server,) + ARM_LAYER[layer] + (w,)


def server_argv(name, a):
    vb = os.path.join(a.venv, "bin")
    base = [a.turnstile_bin, "--venv", a.venv, "--app-dir", APPS, "--host", HOST, "--port", str(PORT),
            "--log-level", "warning"]
    extra = shlex.split(getattr(a, "turnstile_args", ""))  # after ours: a later flag wins
    ts = base + ["--admin-bind", "off"] + extra
    server, _, _, workers = arm_of(name)
    if server == "turnstile":  # the defaults (pools on) and N workers; /metrics for the layer's drops
        return base + ["--admin-bind", "%s:%d" % (HOST, admin_port()), "--workers", str(workers)] + extra + [TARGET]
    if server == "uvicorn":
        return [os.path.join(vb, "uvicorn"), "--host", HOST, "--port", str(PORT), "--workers", str(workers),
                "--loop", "uvloop", "--http", "httptools", "--ws", "websockets", "--app-dir", APPS,
                "--log-level", "warning", "--no-access-log", TARGET]
    if name == "turnstile-on":      # the defaults: --session-threads 4 --blocking-threads 4
        return ts + [TARGET]
    if name == "turnstile-off":     # asgiref's own threads, as before issue 20
        return ts + ["--session-threads", "0", "--blocking-threads", "0", TARGET]
    if name == "uvicorn":
        return [os.path.join(vb, "uvicorn"), "--host", HOST, "--port", str(PORT), "--workers", "1",
                "--loop", "uvloop", "--http", "httptools", "--ws", "websockets", "--app-dir", APPS,
                "--log-level", "warning", "--no-access-log", TARGET]
    if name == "granian":
        return [os.path.join(vb, "granian"), "--interface", "asgi", "--workers", "1", "--host", HOST,
                "--port", str(PORT), "--working-dir", APPS, "--log-level", "warning", "--no-access-log", TARGET]
    if name == "hypercorn":
        return [os.path.join(vb, "hypercorn"), "-b", "%s:%d" % (HOST, PORT), "-w", "1", "-k", "uvloop",
                "--log-level", "warning", TARGET]
    if name == "daphne":
        return [os.path.join(vb, "daphne"), "-b", HOST, "-p", str(PORT), "-v", "0", TARGET]
    raise SystemExit("unknown server " + name)


def admin_port():
    """The admin listener of issue 21's turnstile arms (their /metrics)."""
    return PORT + 100


LAYER_DROPS = ("turnstile_layer_messages_dropped_total", "turnstile_layer_frames_dropped_total",
               "turnstile_layer_relay_dropped_total")


def layer_drops():
    """"messages/frames/relay": turnstile's layer drops over the run so
    far (every worker, every reason), from the master's /metrics."""
    try:
        with urllib.request.urlopen("http://%s:%d/metrics" % (HOST, admin_port()), timeout=5) as r:
            text = r.read().decode()
    except OSError as e:
        return "metrics: %s" % e
    tot = dict.fromkeys(LAYER_DROPS, 0.0)
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) in tot:
            tot[m.group(1)] += float(m.group(2))
    return "/".join("%d" % tot[k] for k in LAYER_DROPS)


def server_env(a, name=""):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ROOMS_"))}
    env["VIRTUAL_ENV"] = a.venv
    env["PATH"] = os.path.join(a.venv, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = APPS
    env.update(rooms_env(a, name))
    return env


def rooms_env(a, name):
    """The ROOMS_* variables of bench/apps/rooms_site.py for an arm (""
    and an `a` without .workload, as overload.py's: issue 20's)."""
    _, layer, ticks, workers = arm_of(name)
    workload = getattr(a, "workload", "db")
    env = {"ROOMS_LAYER": layer, "ROOMS_TICKS": ticks, "ROOMS_WORK": workload}
    if workload == "db":
        env["ROOMS_PG"] = a.pg_sock
    else:
        env["ROOMS_CPU_ITERS"] = str(a.cpu_iters)
    if layer in ("redis", "pubsub"):
        env["ROOMS_REDIS"] = "unix://" + a.redis_sock
    if workers > 1:
        env["ROOMS_CLOCK_DIR"] = a.clock_dir
    return env


def server_cores(a, name):
    """One worker: --server-core; N: --server-cores (both, by default)."""
    return a.server_cores if arm_of(name)[3] > 1 else a.server_core


# ---------------------------------------------------------------- /proc

def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def stat_ticks(path):
    """(ppid, utime+stime) of /proc/<pid>[/task/<tid>]/stat."""
    data = read(path)
    if not data:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[11]) + int(rest[12])


def tree(root):
    """pids of root and its descendants."""
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat_ticks("/proc/%s/stat" % name)
            if st:
                kids.setdefault(st[0], []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def status(pid, field):
    data = read("/proc/%d/status" % pid) or ""
    m = re.search(r"^%s:\s+(\d+)" % field, data, re.M)
    return int(m.group(1)) if m else 0


def runq_ns(pid):
    """Nanoseconds pid's threads have spent runnable but waiting for a CPU
    (the second field of /proc/<pid>/task/<tid>/schedstat, summed)."""
    total = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0
    for tid in tids:
        f = (read("/proc/%d/task/%s/schedstat" % (pid, tid)) or "").split()
        if len(f) >= 2:
            total += int(f[1])
    return total


def core_jiffies(core):
    """(busy, total) jiffies of one CPU, from /proc/stat."""
    m = re.search(r"^cpu%s (.*)$" % core, read("/proc/stat") or "", re.M)
    if not m:
        return (0, 0)
    v = [int(x) for x in m.group(1).split()]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v) - idle, sum(v))


def loop_tid(pid):
    """ts-loop-0 under turnstile, else the process's main thread."""
    for tid in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else ():
        if (read("/proc/%d/task/%s/comm" % (pid, tid)) or "").strip() == "ts-loop-0":
            return int(tid)
    return pid


class Sampler(threading.Thread):
    """Every 0.25 s: (wall, {pid: (ticks, loop ticks, VmRSS, VmHWM,
    Threads)}, ticks of the extra pids (Redis) together)."""

    def __init__(self, root, core, extra=()):
        super().__init__(daemon=True)
        self.root, self.core, self.extra, self.samples, self.stop_ev = root, core, list(extra), [], threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            t = time.time()
            procs = {}
            for pid in tree(self.root):
                st = stat_ticks("/proc/%d/stat" % pid)
                if st is None:
                    continue
                lt = stat_ticks("/proc/%d/task/%d/stat" % (pid, loop_tid(pid)))
                procs[pid] = (st[1], lt[1] if lt else 0, status(pid, "VmRSS"), status(pid, "VmHWM"),
                              status(pid, "Threads"), runq_ns(pid))
            extra = sum((stat_ticks("/proc/%d/stat" % p) or (0, 0))[1] for p in self.extra)
            self.samples.append((t, procs, extra, core_jiffies(self.core)))
            self.stop_ev.wait(0.25)

    def window(self, t0, t1):
        """Figures over [t0, t1] (the samples nearest inside it): cores of
        the server tree (cpu), of the extra pids (layer_cpu), of the
        busiest process's loop thread (loop_cpu); that process's memory
        and threads; the processes of the tree (procs) and each one's
        cores (cpu_split)."""
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if len(s) < 2:
            return {}
        a, b = s[0], s[-1]
        dt = b[0] - a[0]
        cpu = {p: (b[1][p][0] - a[1][p][0]) / CLK / dt for p in b[1] if p in a[1]}
        worker = max(cpu, key=cpu.get)
        loop = (b[1][worker][1] - a[1][worker][1]) / CLK / dt
        runq = sum(b[1][p][5] - a[1][p][5] for p in b[1] if p in a[1]) / 1e9 / dt
        busy, total = b[3][0] - a[3][0], b[3][1] - a[3][1]
        return {"cpu": round(sum(cpu.values()), 3), "loop_cpu": round(loop, 3), "runq": round(runq, 3),
                "core_busy": round(busy / total, 3) if total else None,
                "layer_cpu": round((b[2] - a[2]) / CLK / dt, 3) if self.extra else "",
                "rss_kib": max(x[1].get(worker, (0, 0, 0))[2] for x in s),
                "hwm_kib": b[1][worker][3],
                "threads": max(x[1].get(worker, (0, 0, 0, 0, 0))[4] for x in s),
                "procs": len(b[1]),
                # each process's cores, busiest first: how the workers shared the load
                "cpu_split": "/".join("%.2f" % c for c in sorted(cpu.values(), reverse=True)),
                "worker_pid": worker}


# ---------------------------------------------------------------- runs

def port_free(port):
    """Whether nothing listens on HOST:port (a bind with SO_REUSEADDR, as a
    server's, succeeds past TIME_WAIT but not past another listener)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((HOST, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def listener_pids(port):
    """pids holding a TCP socket listening on port (/proc/net/tcp, state 0A)."""
    inodes = set()
    for line in (read("/proc/net/tcp") or "").splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            inodes.add("socket:[%s]" % f[9])
    pids = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % name)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (name, fd)) in inodes:
                    pids.add(int(name))
                    break
            except OSError:
                pass
    return pids


def wait_ready(proc, workers=1, timeout=60):
    """True once GET / answers 200 from `workers` distinct pids (the app's
    "/" returns its pid): every worker has imported the app."""
    deadline = time.time() + timeout
    pids = set()
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen("http://%s:%d/" % (HOST, PORT), timeout=2) as r:
                if r.status == 200:
                    pid = json.loads(r.read())["pid"]
                    if pid not in tree(proc.pid):  # another server holds the port: no figure would be ours
                        raise SystemExit("port %d answers from pid %d, not the server started here: give --port"
                                         % (PORT, pid))
                    pids.add(pid)
                    if len(pids) >= workers:
                        return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05 if pids else 0.2)
    return False


def stop(proc):
    T.stop_proc(proc)
    try:  # a worker its master left behind (its own session, started here)
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


def psql(a, sql):
    return subprocess.run(["runuser", "-u", "postgres", "--", os.path.join(a.pg_bin, "psql"), "-h", a.pg_sock,
                           "-U", "postgres", "-d", "rooms", "-qAtc", sql],
                          capture_output=True, text=True, check=True).stdout.strip()


def one_run(a, name, proc, conns, block):
    if a.workload == "db":
        psql(a, "TRUNCATE rooms_move")
    layer = arm_of(name)[1]
    if layer in ("redis", "pubsub"):
        redis_cli(a, "FLUSHALL")
        # Redis is the layer's server: on the arm's cores, its CPU counted
        subprocess.run(["taskset", "-a", "-p", "-c", server_cores(a, name), str(a.redis.pid)], check=True,
                       capture_output=True)
    samp = Sampler(proc.pid, server_cores(a, name).split(",")[-1], [a.redis.pid] if layer in ("redis", "pubsub") else ())
    samp.start()
    argv = ["taskset", "-c", a.client_core, a.ws_load, "-url", "ws://%s:%d" % (HOST, PORT), "-shape", "game",
            "-conns", str(conns), "-duration", "%gs" % a.duration, "-warmup", "%gs" % a.warmup, "-json",
            "-name", name] + (["-block"] if block else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=a.duration * 4 + 120)
    samp.stop_ev.set()
    samp.join()
    drops = layer_drops() if arm_of(name)[0] == "turnstile" else ""
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-300:]}
    r = json.loads(out.stdout)
    r["layer_drops"] = drops
    m = re.search(r"window (\d+) (\d+)", out.stderr)
    if m:
        r.update(samp.window(int(m.group(1)) / 1e9, int(m.group(2)) / 1e9))
    if a.workload == "db":
        r["saved"] = int(psql(a, "SELECT count(*) FROM rooms_move"))
    if "cpu" in r:
        # CPU seconds (server tree + Redis) per frame delivered in the window
        cpu_s = (r["cpu"] + (r.get("layer_cpu") or 0)) * a.duration
        frames = r.get("ticks", 0) + r.get("messages", 0)
        r["us_per_tick"] = round(cpu_s / r["ticks"] * 1e6, 1) if r.get("ticks") else ""
        r["us_per_frame"] = round(cpu_s / frames * 1e6, 1) if frames else ""
    r["holds"] = bool(r.get("ticks_per_client_s", 0) >= 0.95 * NOMINAL_TICKS and r.get("p95_ms", 1e9) < 100)
    return r


def redis_cli(a, *args):
    return subprocess.run(["redis-cli", "-s", a.redis_sock] + list(args), capture_output=True, text=True,
                          check=True).stdout.strip()


def start_redis(a):
    """Debian's redis-server on a private unix socket (no TCP port, no
    persistence) in bench/work/redis-rooms; stopped by the caller."""
    os.makedirs(a.redis_dir, exist_ok=True)
    a.redis_sock = os.path.join(a.redis_dir, "redis.sock")
    a.redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", a.redis_sock, "--unixsocketperm", "700",
                                "--save", "", "--appendonly", "no", "--dir", a.redis_dir, "--daemonize", "no",
                                "--logfile", os.path.join(a.redis_dir, "redis.log")],
                               stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if redis_cli(a, "PING") == "PONG":
                return redis_cli(a, "INFO", "server")
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.1)
    raise SystemExit("redis-server did not start (log in %s)" % a.redis_dir)


def cpu_work_us(a):
    """µs per call of rooms_site.cpu_work at --cpu-iters: the median of 200
    calls in the venv's python, on the server core."""
    code = ("import statistics,time,rooms_site as r\nL=[]\nfor k in range(200):\n"
            " t=time.perf_counter();r.cpu_work(k);L.append(time.perf_counter()-t)\n"
            "print('%.0f'%(statistics.median(L)*1e6))")
    env = dict(server_env(a, "uvicorn-memory"), ROOMS_WORK="cpu", ROOMS_CPU_ITERS=str(a.cpu_iters))
    env.pop("ROOMS_PG", None)
    return subprocess.run(["taskset", "-c", a.server_core, os.path.join(a.venv, "bin", "python"), "-c", code],
                          capture_output=True, text=True, env=env, cwd=APPS).stdout.strip()


def insert_latency(a):
    """p50/p99 ms of 100 autocommit INSERTs through psycopg (the meta)."""
    code = ("import psycopg,time,statistics;c=psycopg.connect(host=%r,dbname='rooms',user='postgres',autocommit=True);"
            "L=[]\nfor i in range(100):\n t=time.perf_counter();c.execute(\"INSERT INTO rooms_move(room,player,key,sent_ns,at)"
            " VALUES (0,'m','u',0,now())\");L.append((time.perf_counter()-t)*1e3)\n"
            "L.sort();print('%%.2f %%.2f'%%(L[49],L[98]))") % a.pg_sock
    return subprocess.run([os.path.join(a.venv, "bin", "python"), "-c", code], capture_output=True,
                          text=True).stdout.strip()


KEYS = ["server", "rep", "arm", "conns", "ticks_per_client_s", "p50_ms", "p95_ms", "p99_ms", "ticks", "messages", "keys",
        "keys_lost", "saved", "errors", "holds", "cpu", "layer_cpu", "loop_cpu", "runq", "core_busy", "us_per_tick",
        "us_per_frame", "rss_kib", "hwm_kib", "threads", "procs", "cpu_split", "layer_drops", "loadavg", "error"]


def main():
    global PORT
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="turnstile-on,turnstile-off,uvicorn,daphne,granian,hypercorn")
    p.add_argument("--conns", default="32,64,96,128,256")
    p.add_argument("--block-conns", type=int, default=32, help="the blocker arm's clients (0: none)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=4)
    p.add_argument("--warmup", type=float, default=1.5)
    p.add_argument("--server-core", default="1", help="cores of a one-worker server (taskset -c)")
    p.add_argument("--server-cores", default="0,1", help="cores of a server with --workers > 1 (an -w<N> arm)")
    p.add_argument("--client-core", default="0", help="ws-load's and PostgreSQL's cores")
    p.add_argument("--port", type=int, default=PORT, help="the servers' port (127.0.0.1)")
    p.add_argument("--workload", choices=("db", "cpu"), default="db",
                   help="a key press: db = an INSERT + COMMIT to PostgreSQL (issue 20); cpu = no database, "
                        "rooms_site.cpu_work(), --cpu-iters rounds of pure-Python arithmetic (issue 21)")
    p.add_argument("--cpu-iters", type=int, default=3000, help="cpu_work's rounds (--workload cpu)")
    p.add_argument("--venv", default=os.path.join(WORK, "venv-3.11"))
    p.add_argument("--turnstile-bin", default=os.environ.get("TURNSTILE_BIN") or os.path.join(ROOT, "bin", "turnstile"))
    p.add_argument("--turnstile-args", default="",
                   help="more turnstile flags, one shell string (diagnostics: '--admin-bind 127.0.0.1:9192 "
                        "--slow-request-threshold 0.3s'); a later flag wins")
    p.add_argument("--pg-dir", default=os.path.join(WORK, "pg-rooms"))
    p.add_argument("--redis-dir", default=os.path.join(WORK, "redis-rooms"))
    p.add_argument("--out", default=os.path.join(BENCH, "results"))
    p.add_argument("--note", default="", help="a line for the meta (e.g. what else runs on the machine)")
    p.add_argument("--summarize", metavar="CSV", help="only rewrite CSV's .md from its rows")
    a = p.parse_args()
    PORT = a.port
    servers = a.servers.split(",")
    for name in servers:
        arm_of(name)  # a bad arm name exits here, before anything starts
    if a.summarize:
        rows = [dict(r, conns=int(r["conns"])) for r in csv.DictReader(open(a.summarize))]
        servers = list(dict.fromkeys(r["server"] for r in rows))
        plan = list(dict.fromkeys((r["arm"], r["conns"]) for r in rows))
        base = a.summarize[:-len(".csv")]
        with open(base + ".md", "w") as f:
            f.write("# rooms %s\n\n%s" % (os.path.basename(base)[len("rooms-"):], summarize(rows, servers, plan)))
        return

    os.makedirs(a.out, exist_ok=True)
    a.ws_load = os.path.join(WORK, "ws-load")
    subprocess.run(["go", "build", "-o", a.ws_load, "./ws-load"], cwd=BENCH, check=True)
    # a private copy: a rebuild mid-run cannot change the binary
    snap = os.path.join(WORK, "turnstile-rooms-%d" % os.getpid())
    subprocess.run(["cp", os.path.realpath(a.turnstile_bin), snap], check=True)
    ts_version = subprocess.run([snap, "--version"], capture_output=True, text=True).stdout.strip()
    a.turnstile_bin = snap
    a.pg_sock, a.redis, a.redis_sock = "", None, ""
    if a.workload == "db":
        a.pg_bin = sorted((os.path.join("/usr/lib/postgresql", v, "bin") for v in os.listdir("/usr/lib/postgresql")),
                          key=lambda s: [int(x) for x in re.findall(r"\d+", s)])[-1]
        a.pg_sock = subprocess.run(["taskset", "-c", a.client_core, "bash", os.path.join(HERE, "pg.sh"), "start",
                                    a.pg_dir], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        pg_version = psql(a, "SHOW server_version")
        ins = insert_latency(a)
    else:
        cpu_us = cpu_work_us(a)
    # a room's ticker runs in one worker only (rooms_site.py, ROOMS_CLOCK_DIR)
    a.clock_dir = os.path.join(WORK, "rooms-clocks-%d" % os.getpid())
    os.makedirs(a.clock_dir, exist_ok=True)
    redis_info = ""
    if any(arm_of(n)[1] in ("redis", "pubsub") for n in servers):
        redis_info = start_redis(a)
    plan = [("full", int(n)) for n in a.conns.split(",") if n]
    if a.block_conns:
        plan.append(("blocker", a.block_conns))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(a.out, "rooms-%s" % stamp)
    started, load_before = time.time(), open("/proc/loadavg").read().split()[:3]
    rows, cmdlines = [], {}
    try:
        for rep in range(a.reps):
            for arm, conns in plan:
                for name in servers:
                    if not port_free(PORT):
                        raise SystemExit("port %d is in use by another process (another bench?): "
                                         "--port another" % PORT)
                    argv = ["taskset", "-c", server_cores(a, name)] + server_argv(name, a)
                    cmdlines[name] = " ".join("%s=%s" % kv for kv in sorted(rooms_env(a, name).items())) + \
                        " " + shlex.join(argv)
                    logf = open(os.path.join(WORK, "rooms-%s-%s.log" % (stamp, name)), "a")
                    proc = subprocess.Popen(argv, cwd=APPS, env=server_env(a, name), stdin=subprocess.DEVNULL,
                                            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
                    try:
                        if not wait_ready(proc, arm_of(name)[3]):
                            print("%s: did not start (log in bench/work)" % name, file=sys.stderr)
                            continue
                        # The answer must come from this server: a server of another run on the port
                        # (its own bench, another session's) answers wait_ready just as well, and
                        # ws-load then measures it (seen: 64 foreign clients on ours, ours on theirs).
                        mine = set(tree(proc.pid)) & listener_pids(PORT)
                        if not mine or listener_pids(PORT) - set(tree(proc.pid)):
                            raise SystemExit("%s: port %d is not (only) this server's: listeners %s, ours %s"
                                             % (name, PORT, sorted(listener_pids(PORT)), sorted(tree(proc.pid))))
                        r = one_run(a, name, proc, conns, arm == "blocker")
                        r.update(server=name, rep=rep, arm=arm, conns=conns,
                                 loadavg=open("/proc/loadavg").read().split()[0])
                        rows.append(r)
                        print(json.dumps({k: r.get(k) for k in KEYS if k in r}), flush=True)
                    finally:
                        stop(proc)
                        logf.close()
    finally:
        if a.workload == "db":
            subprocess.run(["bash", os.path.join(HERE, "pg.sh"), "stop", a.pg_dir])
        if a.redis is not None:
            a.redis.terminate()
            a.redis.wait(15)
        subprocess.run(["rm", "-rf", a.clock_dir])
        os.unlink(snap)
    load_after = open("/proc/loadavg").read().split()[:3]

    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=KEYS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    md = summarize(rows, servers, plan)
    with open(base + ".md", "w") as f:
        f.write("# rooms %s\n\n%s" % (stamp, md))
    with open(base + ".meta.txt", "w") as f:
        f.write("started %s UTC, %.0f s\n" % (datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
                                               .strftime("%Y-%m-%d %H:%M:%S"), time.time() - started))
        f.write("host %s, %d CPUs: %s\n" % (socket.gethostname(), os.cpu_count(), cpu_model()))
        f.write("load average before %s, after %s\n" % (" ".join(load_before), " ".join(load_after)))
        f.write("reps %d interleaved, %gs measured after %gs warm-up; one-worker servers on core %s, "
                "several-worker servers on cores %s (taskset -c; Redis moved to the arm's cores before each run), "
                "ws-load%s on core %s\n"
                % (a.reps, a.duration, a.warmup, a.server_core, a.server_cores,
                   " and PostgreSQL" if a.workload == "db" else "", a.client_core))
        f.write("plan %s\n" % plan)
        f.write("turnstile %s\n" % ts_version)
        if a.workload == "db":
            f.write("workload db: a key press is an INSERT + COMMIT; PostgreSQL %s (%s), synchronous_commit=on "
                    "fsync=on, data on %s; 100 autocommit INSERTs p50/p99 ms: %s\n"
                    % (pg_version, a.pg_bin, a.pg_dir, ins))
        else:
            f.write("workload cpu: no database; a key press runs rooms_site.cpu_work, %d rounds, median %s us "
                    "per call (200 calls, venv python, core %s)\n" % (a.cpu_iters, cpu_us, a.server_core))
        if redis_info:
            m = re.search(r"redis_version:(\S+)", redis_info)
            f.write("Redis %s (Debian's redis-server), unix socket %s, no persistence, FLUSHALL before each run\n"
                    % (m.group(1) if m else "?", a.redis_sock))
        f.write("venv %s: %s\n" % (a.venv, versions(a)))
        if a.note:
            f.write("note: %s\n" % a.note)
        for name, c in cmdlines.items():
            f.write("cmd %s: %s\n" % (name, c))
    print(md)
    print("results: %s.{csv,md,meta.txt}" % base)


def cpu_model():
    m = re.search(r"model name\s*:\s*(.*)", read("/proc/cpuinfo") or "")
    return m.group(1) if m else "?"


def versions(a):
    code = ("import importlib.metadata as m\nfor n in ['Django','channels','asgiref','psycopg','uvicorn','uvloop',"
            "'websockets','daphne','granian','Hypercorn','channels-redis','redis','msgpack']:\n try: print(n+'=='+m.version(n),end=' ')\n except Exception: pass")
    return subprocess.run([os.path.join(a.venv, "bin", "python"), "-c", code], capture_output=True, text=True).stdout.strip()


def summarize(rows, servers, plan):
    out = ["Medians over reps. ticks = tick frames per client per second (nominal %g); key = press -> ack ms; "
           "CPU in cores (server tree; Redis = redis-server's, the redis and pubsub arms; loop = the busiest "
           "process's loop thread); runq = the server's threads runnable but waiting for a CPU, in threads (0 to 1 "
           "on a quiet core; several: the machine held the server off its core); core = the server's (last) core's "
           "busy share, every process's; us/tick = CPU seconds of server tree + Redis over the window / tick frames "
           "delivered in it, us/frame the same over tick frames + acks; RSS/HWM of the busiest process, MiB; "
           "threads = its max. holds = reps where ticks >= %.2f and key p95 < 100 ms.\n"
           % (NOMINAL_TICKS, 0.95 * NOMINAL_TICKS),
           "| arm | clients | server | ticks/c/s | key p50 | key p95 | key p99 | CPU | Redis CPU | loop CPU | runq | core "
           "| us/tick | us/frame | RSS MiB | HWM MiB | threads | holds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    held = {}
    for arm, conns in plan:
        for name in servers:
            rs = [r for r in rows if r["server"] == name and r["arm"] == arm and r["conns"] == conns and not r.get("error")]
            if not rs:
                out.append("| %s | %d | %s | failed ||||||||||||||" % (arm, conns, name))
                continue

            def med(k, scale=1.0):
                v = [float(r[k]) for r in rs if r.get(k) not in (None, "")]
                return statistics.median(v) * scale if v else float("nan")

            def key(k):  # a run with no key acked in its window counts as infinitely slow
                v = [float(r[k]) if float(r.get("p50_ms") or 0) > 0 else float("inf") for r in rs]
                m = statistics.median(v)
                return "%.1f" % m if m != float("inf") else "none acked"
            holds = sum(r["holds"] in (True, "True") for r in rs)
            if arm == "full" and 2 * holds > len(rs):
                held[name] = max(held.get(name, 0), conns)
            out.append("| %s | %d | %s | %.2f | %s | %s | %s | %.2f | %s | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f | %.0f | %d/%d |" % (
                arm, conns, name, med("ticks_per_client_s"), key("p50_ms"), key("p95_ms"), key("p99_ms"), med("cpu"),
                "%.2f" % med("layer_cpu") if any(r.get("layer_cpu") not in (None, "") for r in rs) else "",
                med("loop_cpu"), med("runq"), med("core_busy"), med("us_per_tick"), med("us_per_frame"), med("rss_kib", 1 / 1024),
                med("hwm_kib", 1 / 1024), med("threads"), holds, len(rs)))
    out.append("\nClients held (the most clients of the full arm held in most reps): " +
               ", ".join("%s %s" % (n, held.get(n, "none")) for n in servers) + "\n")
    drops = ["%s %s %d: %s" % (r["server"], r["arm"], r["conns"], r["layer_drops"]) for r in rows
             if r.get("layer_drops") and set(r["layer_drops"]) - set("0/")]
    out.append("turnstile's layer drops over a run (/metrics: messages/frames/relay dropped, every worker): " +
               ("; ".join(drops) if drops else "none") + "\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
