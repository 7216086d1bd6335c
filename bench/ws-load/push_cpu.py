#!/usr/bin/env python3
"""Go's CPU per pushed WebSocket frame (issue 21, "Go's share per frame").

    python3 bench/ws-load/push_cpu.py --bin bin/turnstile-3.11 \
        --venv /work/main/.venv-3.11 --shape ticks --conns 32,64 --reps 3

Starts the binary (one worker, under `taskset -c 1`; --cpus all: unpinned) serving
bench/apps/ws_app.py, drives it with ws-load's `ticks` shape (each client
gets a small text frame every 50 ms from a task of its connection) or
`bcast` (one task sends every client the frame each 50 ms) under
`taskset -c 0`, and reads, around the run, every worker thread's CPU time
(/proc/PID/task/TID/schedstat, ns) and context switches
(/proc/PID/task/TID/status). Threads named ts-* are Python's (loop, pools,
sessions); the rest are Go's (the runtime's Ms running goroutines; a cgo
call made by a goroutine runs on them too). Prints per run: frames
delivered/s, Go and Python CPU µs per frame, Go context switches per frame.
"""
import argparse, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import turnlib as T  # noqa: E402


def threads(pid):
    """{tid: (name, cpu ns, context switches)} of pid's threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
            cs = 0
            for line in open(f"/proc/{pid}/task/{tid}/status"):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    cs += int(line.split()[1])
        except OSError:
            continue
        out[tid] = (name, ns, cs)
    return out


def split(before, after):
    go = py = gocs = 0
    for tid, (name, ns, cs) in after.items():
        _, ns0, cs0 = before.get(tid, (name, 0, 0))
        if name.startswith("ts-"):
            py += ns - ns0
        else:
            go += ns - ns0
            gocs += cs - cs0
    return go, py, gocs


def worker_of(master):
    deadline = time.time() + 20
    while time.time() < deadline:
        kids = []
        for tid in os.listdir(f"/proc/{master}/task"):
            try:
                kids += open(f"/proc/{master}/task/{tid}/children").read().split()
            except OSError:
                pass
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise SystemExit("no worker")


def run_one(binary, venv, shape, conns, duration, wsload, extra, cpus):
    port, admin = T.free_port(), T.free_port()
    pin = ["taskset", "-c", cpus] if cpus != "all" else []
    cmd = pin + [binary, "--port", str(port), "--admin-bind", f"127.0.0.1:{admin}",
           "--venv", venv, "--app-dir", os.path.join(BENCH, "apps"), "--log-level", "warning"] + extra + ["ws_app:app"]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        w = worker_of(srv.pid)
        T.wait_port(port, timeout=20)
        lg = subprocess.Popen(["taskset", "-c", "0", wsload, "-url", f"ws://127.0.0.1:{port}", "-shape", shape,
                               "-conns", str(conns), "-duration", duration, "-warmup", "2s", "-json"],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)  # connected and warm: measure the same window as ws-load
        b = threads(w)
        t0 = time.time()
        secs = float(duration.rstrip("s"))
        time.sleep(0.5 + secs)
        a = threads(w)
        wall = time.time() - t0
        r = json.loads(lg.communicate()[0])
        go, py, gocs = split(b, a)
        frames = r["msgs_per_sec"] * wall
        return {"conns": conns, "rate": round(r["msgs_per_sec"]), "go_us": go / 1e3 / frames,
                "py_us": py / 1e3 / frames, "go_cs": gocs / frames, "go_core": go / 1e9 / wall, "p50_ms": r["p50_ms"]}
    finally:
        T.stop_proc(srv, 10)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--shape", default="ticks")
    ap.add_argument("--conns", default="32,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", default="8s")
    ap.add_argument("--cpus", default="1", help="taskset -c for the server; all: not pinned")
    ap.add_argument("--extra", default="", help="more server flags, space-separated")
    a = ap.parse_args()
    wsload = os.path.join(BENCH, "work", "ws-load")
    subprocess.run(["go", "build", "-o", wsload, "./ws-load"], cwd=BENCH, check=True)
    for conns in [int(c) for c in a.conns.split(",")]:
        rows = []
        for _ in range(a.reps):
            r = run_one(os.path.abspath(a.bin), os.path.abspath(a.venv), a.shape, conns, a.duration, wsload, a.extra.split(), a.cpus)
            rows.append(r)
            print(f"{a.shape} conns={conns}: {r['rate']} frames/s, Go {r['go_us']:.1f} µs/frame ({r['go_core']:.3f} core), "
                  f"Python {r['py_us']:.1f} µs/frame, Go ctx switches {r['go_cs']:.2f}/frame, p50 {r['p50_ms']} ms",
                  flush=True)
        print(f"{a.shape} conns={conns} median: Go {statistics.median(r['go_us'] for r in rows):.1f} µs/frame, "
              f"Go ctx switches {statistics.median(r['go_cs'] for r in rows):.2f}/frame, "
              f"Python {statistics.median(r['py_us'] for r in rows):.1f} µs/frame")


if __name__ == "__main__":
    sys.exit(main())
