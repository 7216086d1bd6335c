"""Watchdog overhead (issue 7): the same ASGI app with the watchdog on
(defaults) and off (--loop-stall-threshold 0 --slow-request-threshold 0),
interleaved pairs; server CPU-seconds per request from /proc over the
server's process tree (master + worker), wrk at saturation.

    python3 bench/watchdog-cost/run.py --pairs 7 --duration 5 --app asgi_hello:app
"""
import argparse, os, re, socket, statistics, subprocess, sys, time, datetime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# The server tree's CPU and a free port come from bench/run.py.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import run as R  # noqa: E402

tree_cpu = R.tree_cpu_seconds
free_port = R.free_port


def run(arm, args):
    port = free_port()
    cmd = ["taskset", "-c", "1", args.bin, "--venv", args.venv,
           "--app-dir", os.path.join(ROOT, "testapps"), "--host", "127.0.0.1", "--port", str(port),
           "--admin-bind", "off", "--log-level", "warning"]
    if arm == "off":
        cmd += ["--loop-stall-threshold", "0", "--slow-request-threshold", "0"]
    srv = subprocess.Popen(cmd + [args.app], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close(); break
        except OSError:
            time.sleep(0.05)
    url = f"http://127.0.0.1:{port}/"
    subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c64", "-d1s", url], capture_output=True)
    c0 = tree_cpu(srv.pid)
    out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c64", f"-d{args.duration}s", url],
                         capture_output=True, text=True).stdout
    c1 = tree_cpu(srv.pid)
    srv.terminate(); srv.wait(10)
    n = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rps, (c1 - c0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--app", default="asgi_hello:app")
    ap.add_argument("--venv", default=os.path.join(ROOT, "bench/work/venv-3.11"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin/turnstile"),
                    help="the binary (copied first, so a rebuild mid-run cannot change it)")
    args = ap.parse_args()
    snap = os.path.join("/tmp", "watchdog-cost-bin-%d" % os.getpid())
    subprocess.run(["cp", os.path.realpath(args.bin), snap], check=True)
    args.bin = snap
    rows, ratios = [], []
    load0 = open("/proc/loadavg").read().strip()
    for i in range(args.pairs):
        order = ["on", "off"] if i % 2 == 0 else ["off", "on"]
        res = {arm: run(arm, args) for arm in order}
        ratios.append(res["on"][1] / res["off"][1])
        rows.append((i, res["on"], res["off"]))
        print(f"pair {i}: on {res['on'][0]:.0f} req/s {res['on'][1]:.2f} us/req, off {res['off'][0]:.0f} req/s {res['off'][1]:.2f} us/req", flush=True)
    med = statistics.median(ratios)
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(args.out, f"watchdog-cost-{stamp}.txt")
    with open(path, "w") as f:
        f.write(f"# watchdog overhead, app {args.app}, {args.pairs} interleaved pairs, wrk -t1 -c64 -d{args.duration}s\n")
        f.write(f"# command: python3 bench/watchdog-cost/run.py --pairs {args.pairs} --duration {args.duration} --app {args.app}\n")
        f.write(f"# server on core 1 (taskset), wrk on core 0; off = --loop-stall-threshold 0 --slow-request-threshold 0\n")
        f.write(f"# loadavg before: {load0}; after: {open('/proc/loadavg').read().strip()}\n")
        f.write(f"# {subprocess.run([args.bin, '--version'], capture_output=True, text=True).stdout.strip()}; nproc {os.cpu_count()}\n")
        f.write("pair,on_rps,on_cpu_us_per_req,off_rps,off_cpu_us_per_req,ratio_on_off\n")
        for i, on, off in rows:
            f.write(f"{i},{on[0]:.0f},{on[1]:.3f},{off[0]:.0f},{off[1]:.3f},{on[1]/off[1]:.4f}\n")
        verdict = "PASS" if med <= 1.02 else "FAIL"
        f.write(f"# median CPU/request ratio on/off: {med:.4f} -> {verdict} (limit 1.02)\n")
    print(f"median ratio on/off {med:.4f}; wrote {path}")


if __name__ == "__main__":
    main()
