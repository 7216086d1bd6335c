"""Loop-stall scenario (issue 7): 32 connections on a fast route while one
connection blocks the event loop for 200 ms once a second. For turnstile,
turnstile --loops 4 (issue 22), uvicorn (uvloop + httptools), Granian and
djust serve --loops 4 --allow-gil (djust 1.3's multi-loop launcher, when
installed), one worker each, on the same app
(stallapp.py): the fast route's latency (vegeta, open loop at a fixed rate,
at most 32 connections), what each server reports about the stalls
(turnstile: its stall counters and log records; the others: nothing), and
what py-spy (PyPI) shows when it dumps the worker during one stall.

    python3 bench/loop-stall/run.py --reps 5 --duration 20 --rate 1000
    python3 bench/loop-stall/run.py --kinds turnstile,turnstile-loops4 --reps 1 --duration 10

With --loops 4 the /block client opens a new connection each time, so it
lands on the loop with the fewest requests in flight; the fast route's
32 kept-alive connections are spread over the four loops, and those on
the /block's loop wait for it (a connection stays on its loop): the p99
of the fast route counts them.

Results: bench/results/loop-stall-<stamp>.csv, .meta.txt, .pyspy.txt.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import turnlib as T  # noqa: E402
import run as R  # noqa: E402

KINDS = ("turnstile", "turnstile-loops4", "uvicorn", "granian", "djust-loops4")
DEFAULT_KINDS = "turnstile,turnstile-loops4,uvicorn,granian"


def argv_for(kind, tbin, venv, port, admin_port):
    if kind.startswith("turnstile"):
        # --log-level info: the stall records are warnings, but keep the
        # default level a user runs with.
        loops = ["--loops", "4"] if kind == "turnstile-loops4" else []
        return [tbin, "--venv", venv, "--app-dir", HERE, "--host", T.HOST, "--port", str(port),
                "--admin-bind", "%s:%d" % (T.HOST, admin_port), "--log-format", "json"] + loops + [
                "stallapp:app"]
    if kind == "djust-loops4":
        # djust 1.3's launcher: uvicorn on 4 loops sharing one socket (the
        # kernel's accept race); --allow-gil runs it on a GIL build.
        return [os.path.join(venv, "bin", "djust"), "serve", "--loops", "4", "--allow-gil", "--app-dir", HERE,
                "--host", T.HOST, "--port", str(port), "--log-level", "warning", "stallapp:app"]
    if kind == "uvicorn":
        return [os.path.join(venv, "bin", "uvicorn"), "--app-dir", HERE, "--host", T.HOST,
                "--port", str(port), "--loop", "uvloop", "--http", "httptools",
                "--no-access-log", "--log-level", "warning", "stallapp:app"]
    return [os.path.join(venv, "bin", "granian"), "--interface", "asgi", "--workers", "1",
            "--host", T.HOST, "--port", str(port), "--working-dir", HERE,
            "--log-level", "warning", "--no-access-log", "stallapp:app"]


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def first_stall(log):
    with open(log, errors="replace") as f:
        for line in f:
            if '"event loop stalled' in line:
                try:
                    return json.dumps(json.loads(line), indent=1)
                except ValueError:
                    return line
    return "(none)"


class Blocker(threading.Thread):
    """GET /block once a second on its own connection."""

    def __init__(self, url, on_block=None):
        super().__init__(daemon=True)
        self.url, self.stop, self.n, self.on_block = url, threading.Event(), 0, on_block
        self.lat = []

    def run(self):
        nxt = time.monotonic() + 0.5
        while not self.stop.is_set():
            time.sleep(max(0, nxt - time.monotonic()))
            nxt += 1.0
            if self.on_block:
                threading.Timer(0.08, self.on_block).start()
                self.on_block = None
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    r.read()
                self.n += 1
                self.lat.append(time.monotonic() - t0)
            except Exception:  # noqa: BLE001
                pass


def one(kind, args, tbin, rep, pyspy_out):
    port, admin = R.free_port(), R.free_port()
    log = os.path.join(T.WORK, "loop-stall-%s-%d-%d.log" % (kind, os.getpid(), rep))
    srv = T.Srv(kind, argv_for(kind, tbin, args.venv, port, admin), args.venv, HERE, log)
    try:
        err = srv.wait_ready(port, "/")
        if err:
            raise SystemExit("%s: %s (log %s)" % (kind, err, log))
        time.sleep(0.5)
        m0 = None
        if kind.startswith("turnstile"):
            m0 = T.scrape(admin)
        dump = None
        if rep == 0:
            def dump_now():
                nonlocal dump
                texts = []
                for pid in descendants(srv.proc.pid):
                    p = subprocess.run([os.path.join(args.venv, "bin", "py-spy"), "dump", "--pid", str(pid)],
                                       capture_output=True, text=True, timeout=30)
                    texts.append("$ py-spy dump --pid %d   (exit %d)\n%s%s" % (pid, p.returncode, p.stdout, p.stderr))
                dump = "\n".join(texts)
            on_block = dump_now
        else:
            on_block = None
        b = Blocker("http://%s:%d/block" % (T.HOST, port), on_block)
        b.start()
        c0 = T.Mark(srv.proc.pid)
        cmd, v = T.vegeta(args.rate, args.duration, "http://%s:%d/" % (T.HOST, port),
                          os.path.join(T.WORK, "loop-stall-%s.bin" % kind), max_conns=32)
        c1 = T.Mark(srv.proc.pid)
        b.stop.set()
        b.join(15)
        stall_s = stalls = records = ""
        if kind.startswith("turnstile"):
            m1 = T.scrape(admin)
            stall_s = T.counter(m1, "turnstile_loop_stall_seconds_total") - T.counter(m0, "turnstile_loop_stall_seconds_total")
            stalls = T.counter(m1, "turnstile_loop_stalls_total") - T.counter(m0, "turnstile_loop_stalls_total")
        if dump is not None:
            with open(pyspy_out, "a") as f:
                f.write("\n===== %s: py-spy, 80 ms into a /block\n%s\n" % (kind, dump))
                if kind.startswith("turnstile"):
                    f.write("\n===== turnstile: its own first stall record (log)\n%s\n" % first_stall(log))
        u = T.usage(c0, c1)
        row = dict(server=kind, rep=rep, rate=args.rate, duration_s=args.duration,
                   blocks=b.n, block_p50_ms=round(statistics.median(b.lat) * 1000, 1) if b.lat else "",
                   **{k: v.get(k, "") for k in ("requests", "errors", "p50_ms", "p99_ms", "max_ms", "achieved_rate", "error")},
                   stall_seconds_reported=round(stall_s, 3) if stall_s != "" else "",
                   stalls_reported=int(stalls) if stalls != "" else "",
                   server_cpu_s=round(u["server_cpu_s"], 3), others_cores=round(u["others_cores"], 3),
                   cmd=srv.cmdline())
        return row, srv.logpath
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--venv", default=T.default_venv())
    ap.add_argument("--kinds", default=DEFAULT_KINDS, help="comma-separated, of " + ",".join(KINDS))
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    for k in kinds:
        if k not in KINDS:
            raise SystemExit("--kinds: unknown %r (want %s)" % (k, ",".join(KINDS)))
    if "djust-loops4" in kinds and not os.path.exists(os.path.join(args.venv, "bin", "djust")):
        print("djust is not installed in %s: djust-loops4 skipped" % args.venv, flush=True)
        kinds = tuple(k for k in kinds if k != "djust-loops4")
    os.sched_setaffinity(0, {T.CLIENT_CORE})
    tbin, tinfo = T.snapshot_turnstile()
    st = T.stamp()
    base = os.path.join(T.RESULTS, "loop-stall-%s" % st)
    started, load_before = R.utcnow(), R.loadavg()
    rows = []
    for rep in range(args.reps):
        order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
        for kind in order:
            T.quiet()
            row, _ = one(kind, args, tbin, rep, base + ".pyspy.txt")
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| server | fast p50 ms | fast p99 ms | fast max ms | errors | /block answered | stall s reported |",
             "|---|---|---|---|---|---|---|"]
    for kind in kinds:
        rs = [r for r in rows if r["server"] == kind]
        med = lambda k: statistics.median(float(r[k]) for r in rs if r[k] != "")  # noqa: E731
        rep_s = "%.2f" % med("stall_seconds_reported") if kind.startswith("turnstile") else "nothing"
        lines.append("| %s | %.2f | %.1f | %.1f | %d | %d | %s |" % (
            kind, med("p50_ms"), med("p99_ms"), med("max_ms"), med("errors"), med("blocks"), rep_s))
    summary = "medians of %d reps:\n" % args.reps + "\n".join(lines)
    T.write_meta(base + ".meta.txt", "loop-stall: 32 connections on / at %d req/s (vegeta, open loop, "
                 "-max-connections 32) for %d s while GET /block does time.sleep(0.2) once a second" % (args.rate, args.duration),
                 {r["server"]: r["cmd"] for r in rows[:len(kinds)]},
                 ["one worker per server, pinned to core %d; vegeta and the /block client on core %d" % (T.SERVER_CORE, T.CLIENT_CORE),
                  "turnstile's stall figures: turnstile_loop_stall_seconds_total / _stalls_total deltas from its admin /metrics",
                  "py-spy 0.4.3 dump of every process of each server 80 ms into one /block: %s" % os.path.basename(base + ".pyspy.txt")],
                 args.venv, tinfo, load_before, started, summary)
    print(summary)


if __name__ == "__main__":
    main()
