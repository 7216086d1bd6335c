"""bench/rooms/overload.py: issue 20's overload case against uvicorn.

    python3 bench/rooms/overload.py --reps 3

400 concurrent requests (one connection each, all sent at once) to a
Django ASGI sync view that sleeps 1 s (bench/apps/rooms_site.py /sleep/),
one worker process, server on core 1, client on core 0, servers
interleaved per rep:

    turnstile-50   --blocking-threads 50 (bounded: the requests wait as
                   coroutines; 400 take ~8 s)
    turnstile-0    --blocking-threads 0 (asgiref: a thread per request)
    uvicorn        --loop uvloop --http httptools (a thread per request)

Sampled every 50 ms: the worker's Threads (/proc/PID/status) and VmRSS;
recorded: idle threads, peak threads, peak VmRSS, VmHWM after the burst,
the threads by name at the peak, the burst's wall time and statuses.
tests/asgi_pools_test.go TestPools_Overload400 checks turnstile's bound;
this records the comparison. Results: bench/results/overload-<UTC>.{csv,md,meta.txt}.
Python 3 stdlib only.
"""

import argparse
import asyncio
import collections
import csv
import datetime
import importlib.util
import os
import shlex
import socket
import subprocess
import threading
import time

# rooms/run.py, loaded under its own name: "run" is bench/run.py, which
# rooms/run.py's turnlib imports.
_spec = importlib.util.spec_from_file_location("rooms_run", os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py"))
R = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(R)

PORT = 8793


def argv(name, a):
    if name.startswith("turnstile-"):
        return [a.turnstile_bin, "--venv", a.venv, "--app-dir", R.APPS, "--host", R.HOST, "--port", str(PORT),
                "--admin-bind", "off", "--log-level", "warning", "--blocking-threads", name.split("-")[1],
                "--queue-size", "1000", R.TARGET]
    if name == "uvicorn":
        return [os.path.join(a.venv, "bin", "uvicorn"), "--host", R.HOST, "--port", str(PORT), "--workers", "1",
                "--loop", "uvloop", "--http", "httptools", "--app-dir", R.APPS, "--log-level", "warning",
                "--no-access-log", R.TARGET]
    raise SystemExit("unknown server " + name)


def worker_of(root):
    """The process of the tree that has the most threads (turnstile's worker)."""
    return max(R.tree(root), key=lambda p: R.status(p, "Threads"))


def comms(pid):
    c = collections.Counter()
    for tid in os.listdir("/proc/%d/task" % pid):
        name = (R.read("/proc/%d/task/%s/comm" % (pid, tid)) or "?").strip()
        c[name.rstrip("0123456789").rstrip("-_") or name] += 1
    return dict(sorted(c.items()))


async def burst(n, path):
    async def one():
        try:
            r, w = await asyncio.open_connection(R.HOST, PORT)
            w.write(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
            await w.drain()
            line = await asyncio.wait_for(r.readline(), 60)
            await r.read()
            w.close()
            return int(line.split()[1])
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
    return collections.Counter(await asyncio.gather(*(one() for _ in range(n))))


def one(a, name):
    env = R.server_env(a)
    proc = subprocess.Popen(["taskset", "-c", a.server_core] + argv(name, a), cwd=R.APPS, env=env,
                            stdin=subprocess.DEVNULL, stdout=a.log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        R.PORT = PORT
        if not R.wait_ready(proc):
            return {"server": name, "error": "did not start"}
        for _ in range(3):  # warm: Django's first request, the pools started
            urllib_get("/sleep/?s=0")
        w = worker_of(proc.pid)
        idle, idle_rss = R.status(w, "Threads"), R.status(w, "VmRSS")
        peak = {"threads": idle, "rss": R.status(w, "VmRSS"), "comms": comms(w)}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                t = R.status(w, "Threads")
                peak["rss"] = max(peak["rss"], R.status(w, "VmRSS"))
                if t > peak["threads"]:
                    peak["threads"] = t
                    peak["comms"] = comms(w)
                stop.wait(0.05)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t0 = time.monotonic()
        codes = asyncio.run(burst(a.n, "/sleep/?s=%g" % a.sleep))
        wall = time.monotonic() - t0
        stop.set()
        th.join()
        return {"server": name, "idle_threads": idle, "idle_rss_kib": idle_rss, "peak_threads": peak["threads"],
                "peak_rss_kib": peak["rss"], "hwm_kib": R.status(w, "VmHWM"), "wall_s": round(wall, 2),
                "statuses": " ".join("%s:%d" % kv for kv in sorted(codes.items(), key=str)),
                "peak_comms": " ".join("%s=%d" % kv for kv in peak["comms"].items())}
    finally:
        R.stop(proc)


def urllib_get(path):
    with socket.create_connection((R.HOST, PORT), 10) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        while s.recv(65536):
            pass


KEYS = ["server", "rep", "idle_threads", "idle_rss_kib", "peak_threads", "peak_rss_kib", "hwm_kib", "wall_s", "statuses",
        "peak_comms", "loadavg", "error"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="turnstile-50,turnstile-0,uvicorn")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("-n", type=int, default=400)
    p.add_argument("--sleep", type=float, default=1.0)
    p.add_argument("--server-core", default="1")
    p.add_argument("--client-core", default="0")
    p.add_argument("--venv", default=os.path.join(R.WORK, "venv-3.11"))
    p.add_argument("--turnstile-bin", default=os.environ.get("TURNSTILE_BIN") or os.path.join(R.ROOT, "bin", "turnstile"))
    p.add_argument("--out", default=os.path.join(R.BENCH, "results"))
    p.add_argument("--note", default="")
    a = p.parse_args()
    a.turnstile_bin = os.path.abspath(a.turnstile_bin)
    os.sched_setaffinity(0, {int(a.client_core)})
    a.pg_sock = "/nonexistent"  # the sleep view never touches the database
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(a.out, exist_ok=True)
    a.log = open(os.path.join(R.WORK, "overload-%s.log" % stamp), "ab")
    ts_version = subprocess.run([a.turnstile_bin, "--version"], capture_output=True, text=True).stdout.strip()
    load_before = open("/proc/loadavg").read().split()[:3]
    rows = []
    for rep in range(a.reps):
        for name in a.servers.split(","):
            r = one(a, name)
            r.update(rep=rep, loadavg=open("/proc/loadavg").read().split()[0])
            rows.append(r)
            print(r, flush=True)
    base = os.path.join(a.out, "overload-%s" % stamp)
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=KEYS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = ["# overload %s\n" % stamp,
             "%d concurrent GET /sleep/?s=%g (Django sync view), one worker; medians over %d reps (peak comms: rep 0).\n"
             % (a.n, a.sleep, a.reps),
             "| server | idle threads | peak threads | idle VmRSS MiB | peak VmRSS MiB | burst's RSS growth MiB | VmHWM MiB | wall s | statuses (rep 0) | threads at the peak (rep 0) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    import statistics
    for name in a.servers.split(","):
        rs = [r for r in rows if r["server"] == name and "error" not in r]
        if not rs:
            lines.append("| %s | failed |||||||||" % name)
            continue
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        growth = statistics.median(r["peak_rss_kib"] - r["idle_rss_kib"] for r in rs) / 1024
        lines.append("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |" % (
            name, med("idle_threads"), med("peak_threads"), med("idle_rss_kib") / 1024, med("peak_rss_kib") / 1024,
            growth, med("hwm_kib") / 1024,
            med("wall_s"), rs[0]["statuses"], rs[0]["peak_comms"]))
    md = "\n".join(lines) + "\n"
    with open(base + ".md", "w") as f:
        f.write(md)
    with open(base + ".meta.txt", "w") as f:
        f.write("load average before %s, after %s; %d CPUs: %s\n" % (
            " ".join(load_before), " ".join(open("/proc/loadavg").read().split()[:3]), os.cpu_count(), R.cpu_model()))
        f.write("turnstile %s\nvenv %s: %s\n" % (ts_version, a.venv, R.versions(a)))
        if a.note:
            f.write("note: %s\n" % a.note)
        for name in a.servers.split(","):
            f.write("cmd %s: %s\n" % (name, shlex.join(["taskset", "-c", a.server_core] + argv(name, a))))
    print(md)
    print("results: %s.{csv,md,meta.txt}" % base)


if __name__ == "__main__":
    main()
