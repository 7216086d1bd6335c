#!/usr/bin/env python3
"""WebSocket echo, old binary against new, interleaved (issue 19's "no cost").

    python3 bench/ws-pair/pair.py --a OLD_BIN --b NEW_BIN --pairs 5 \
        --venv .venv-3.11 --out bench/results

Each pair starts A then B (the order alternates per pair) under
`taskset -c 1` serving bench/apps/ws_app.py (one worker), drives it with
ws-load's echo shape under `taskset -c 0`, and reads the server's CPU
seconds (the master and its worker, /proc/PID/stat utime+stime) around the
measured window. Prints and writes (CSV) round trips/s and CPU µs per round
trip per run, and the median of the per-pair B/A ratios.
"""
import argparse, csv, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import turnlib as T  # noqa: E402
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid):
    """CPU seconds of pid and its children (one level: master + workers)."""
    total = 0.0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            f = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        fields = f[f.rindex(")") + 2:].split()
        ppid = int(fields[1])
        if int(p) == pid or ppid == pid:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def run_one(binary, venv, conns, duration, wsload):
    port, admin = T.free_port(), T.free_port()
    cmd = ["taskset", "-c", "1", binary, "--port", str(port), "--admin-bind", f"127.0.0.1:{admin}",
           "--venv", venv, "--app-dir", os.path.join(BENCH, "apps"), "--log-level", "warning", "ws_app:app"]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        T.wait_port(port, timeout=20)
        # ws-load warms up 1 s, then measures `duration`; CPU is read around
        # the whole run and scaled by the measured share (warm-up included
        # at the same rate).
        c0 = tree_cpu(srv.pid)
        t0 = time.time()
        out = subprocess.run(["taskset", "-c", "0", wsload, "-url", f"ws://127.0.0.1:{port}", "-shape", "echo",
                              "-conns", str(conns), "-duration", duration, "-json"],
                             capture_output=True, text=True, check=True).stdout
        wall = time.time() - t0
        cpu = tree_cpu(srv.pid) - c0
        r = json.loads(out)
        rate = r["msgs_per_sec"]
        return rate, cpu / wall / rate * 1e6, r["p50_ms"], r["errors"]
    finally:
        T.stop_proc(srv, 10)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--venv", required=True)
    ap.add_argument("--out", default=os.path.join(BENCH, "results"))
    a = ap.parse_args()
    wsload = os.path.join(BENCH, "work", "ws-load")
    if not os.path.exists(wsload):
        subprocess.run(["go", "build", "-o", wsload, "./ws-load"], cwd=BENCH, check=True)
    rows, ratios = [], []
    for i in range(a.pairs):
        order = [("a", a.a), ("b", a.b)] if i % 2 == 0 else [("b", a.b), ("a", a.a)]
        got = {}
        for side, binary in order:
            rate, us, p50, errs = run_one(binary, os.path.abspath(a.venv), a.conns, a.duration, wsload)
            got[side] = us
            rows.append({"pair": i, "side": side, "rate": round(rate), "cpu_us_per_rt": round(us, 2), "p50_ms": p50,
                         "errors": errs, "load1": os.getloadavg()[0]})
            print(f"pair {i} {side}: {rate:.0f} rt/s, {us:.2f} µs CPU per round trip, p50 {p50} ms, errors {errs}")
        ratios.append(got["b"] / got["a"])
    print(f"CPU per round trip B/A: per pair {[round(r, 3) for r in ratios]}, median {statistics.median(ratios):.3f}")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, time.strftime("ws-pair-%Y%m%dT%H%M%SZ.csv", time.gmtime()))
    with open(path, "w", newline="") as f:
        f.write(f"# a={a.a} b={a.b} conns={a.conns} duration={a.duration} cpus={os.cpu_count()} "
                f"kernel={os.uname().release}\n")
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)


if __name__ == "__main__":
    sys.exit(main())
