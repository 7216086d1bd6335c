"""WebSocket benchmark driver: turnstile against its ASGI peers with ws-load.

    python3 bench/ws-load/run.py --reps 3 --duration 5 \
        --servers turnstile,granian,uvicorn,hypercorn,daphne

For each rep, every server in turn (interleaved, so that drift on the
shared machine hits all of them alike) is started under `taskset -c 1`
serving bench/apps/ws_app.py from the bench venv, and ws-load (built from
this directory) runs under `taskset -c 0`:

    echo   at --echo-conns (8,64,512): closed-loop round trips/s, RTT
    rooms  at --rooms-conns (64,256,1024): rooms of 4, one message per
           client every 400 ms pushed to the room; delivery latency
    idle   --idle-conns (1000) clients: server RSS per connected client
           (first, on the freshly started server; RSS is reported only
           for this shape)

Results: bench/results/ws-<UTC>.csv (one row per run), .bench.txt
(benchstat lines) and .md (medians per server and shape). Python 3 stdlib
only; run it with the system python3. Same machine caveats as bench/README.md.
"""

import argparse
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import turnlib as T  # noqa: E402
ROOT = os.path.dirname(BENCH)
APPS = os.path.join(BENCH, "apps")
HOST = "127.0.0.1"
PORT = 8790


def server_argv(name, a):
    venv_bin = os.path.join(a.venv, "bin")
    target = "ws_app:app"
    if name == "turnstile":
        return [a.turnstile_bin, "--venv", a.venv, "--app-dir", APPS, "--host", HOST, "--port", str(PORT),
                "--admin-bind", "off", "--log-level", "warning", target]
    if name == "granian":
        return [os.path.join(venv_bin, "granian"), "--interface", "asgi", "--workers", "1", "--host", HOST,
                "--port", str(PORT), "--working-dir", APPS, "--log-level", "warning", "--no-access-log", target]
    if name == "uvicorn":
        return [os.path.join(venv_bin, "uvicorn"), "--host", HOST, "--port", str(PORT), "--workers", "1",
                "--loop", "uvloop", "--http", "httptools", "--ws", "websockets", "--app-dir", APPS,
                "--log-level", "warning", "--no-access-log", target]
    if name == "hypercorn":
        return [os.path.join(venv_bin, "hypercorn"), "-b", "%s:%d" % (HOST, PORT), "-w", "1", "-k", "uvloop",
                "--log-level", "warning", target]
    if name == "daphne":
        return [os.path.join(venv_bin, "daphne"), "-b", HOST, "-p", str(PORT), "-v", "0", target]
    raise SystemExit("unknown server " + name)


def start(name, a, logf):
    argv = ["taskset", "-c", a.server_core] + server_argv(name, a)
    proc = subprocess.Popen(argv, cwd=APPS, stdout=logf, stderr=logf, start_new_session=True)
    if not T.wait_port(PORT, proc):
        stop(proc)
        return None
    time.sleep(0.5)
    return proc


stop = T.stop_proc


def load(a, name, pid, shape, conns):
    argv = ["taskset", "-c", a.client_core, a.ws_load, "-url", "ws://%s:%d" % (HOST, PORT), "-shape", shape,
            "-conns", str(conns), "-duration", "%gs" % a.duration, "-warmup", "%gs" % a.warmup,
            "-pid", str(pid), "-json", "-name", name]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=a.duration * 4 + 120)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-300:]}
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="turnstile,granian,uvicorn,hypercorn,daphne")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--warmup", type=float, default=1)
    p.add_argument("--echo-conns", default="8,64,512")
    p.add_argument("--rooms-conns", default="64,256,1024")
    p.add_argument("--idle-conns", type=int, default=1000)
    p.add_argument("--server-core", default="1")
    p.add_argument("--client-core", default="0")
    p.add_argument("--venv", default=os.path.join(BENCH, "work", "venv-%d.%d" % sys.version_info[:2]))
    p.add_argument("--turnstile-bin", default=os.environ.get("TURNSTILE_BIN") or os.path.join(ROOT, "bin", "turnstile"))
    p.add_argument("--out", default=os.path.join(BENCH, "results"))
    p.add_argument("--tag", default="", help="added to the result file names")
    a = p.parse_args()

    work = os.path.join(BENCH, "work")
    os.makedirs(work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    a.ws_load = os.path.join(work, "ws-load")
    subprocess.run(["go", "build", "-o", a.ws_load, "."], cwd=HERE, check=True)
    servers = a.servers.split(",")
    # idle first: RSS per client is measured on a fresh server
    plan = [("idle", a.idle_conns)] if a.idle_conns else []
    plan += [("echo", int(n)) for n in a.echo_conns.split(",") if n]
    plan += [("rooms", int(n)) for n in a.rooms_conns.split(",") if n]

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    load_before = open("/proc/loadavg").read().split()[:3]
    base = os.path.join(a.out, "ws-%s%s" % (stamp, "-" + a.tag if a.tag else ""))
    rows = []
    with open(base + ".bench.txt", "w") as bench:
        for rep in range(a.reps):
            for name in servers:
                logf = open(os.path.join(work, "ws-%s-%s.log" % (stamp, name)), "a")
                proc = start(name, a, logf)
                if proc is None:
                    print("%s: did not start; skipped (log in bench/work)" % name, file=sys.stderr)
                    continue
                try:
                    for shape, conns in plan:
                        r = load(a, name, proc.pid, shape, conns)
                        r.update(server=name, rep=rep, shape=shape, conns=conns)
                        rows.append(r)
                        if "error" in r:
                            print("%s %s %d: %s" % (name, shape, conns, r["error"]), file=sys.stderr)
                            continue
                        line = "BenchmarkWS/%s/%s/conns=%d 1 %.0f msgs/s %.3f p50-ms %.3f p95-ms %.3f p99-ms %.1f rss-KiB/conn %d errors" % (
                            shape, name, conns, r["msgs_per_sec"], r["p50_ms"], r["p95_ms"], r["p99_ms"],
                            r["rss_per_conn_kib"], r["errors"])
                        print(line, flush=True)
                        bench.write(line + "\n")
                finally:
                    stop(proc)
                    logf.close()
    keys = ["server", "rep", "shape", "conns", "msgs_per_sec", "p50_ms", "p95_ms", "p99_ms", "errors",
            "rss_base_kib", "rss_connected_kib", "rss_per_conn_kib", "error"]
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with open(base + ".md", "w") as f:
        f.write("# WebSocket bench %s\n\n" % stamp)
        f.write("%d reps x %gs (+%gs warm-up), server on core %s, ws-load on core %s; medians.\n" % (
            a.reps, a.duration, a.warmup, a.server_core, a.client_core))
        f.write("Load average before %s, after %s (the machine is shared: tails are noisy).\n\n" % (
            " ".join(load_before), " ".join(open("/proc/loadavg").read().split()[:3])))
        f.write("| shape | conns | server | msgs/s | p50 ms | p95 ms | p99 ms | RSS KiB/conn | errors |\n|---|---|---|---|---|---|---|---|---|\n")
        for shape, conns in plan:
            for name in servers:
                rs = [r for r in rows if r["server"] == name and r["shape"] == shape and r["conns"] == conns and "error" not in r]
                if not rs:
                    f.write("| %s | %d | %s | failed | | | | | |\n" % (shape, conns, name))
                    continue
                med = lambda k: statistics.median(r[k] for r in rs)
                if shape == "idle":
                    f.write("| idle | %d | %s | | | | | %.1f | %d |\n" % (
                        conns, name, med("rss_per_conn_kib"), sum(r["errors"] for r in rs)))
                    continue
                f.write("| %s | %d | %s | %.0f | %.2f | %.2f | %.2f | | %d |\n" % (
                    shape, conns, name, med("msgs_per_sec"), med("p50_ms"), med("p95_ms"), med("p99_ms"),
                    sum(r["errors"] for r in rs)))
    print("results: %s.{csv,bench.txt,md}" % base)


if __name__ == "__main__":
    main()
