"""Proxy-header cost (issue 9): the WSGI hello app, four arms, from a
trusted client (127.0.0.1, in the default --forwarded-allow-ips):

    off      --no-proxy-headers, no forwarding headers
    on       defaults, no forwarding headers (the check runs, nothing applies)
    off-xff  --no-proxy-headers, X-Forwarded-For/-Proto/-Host on every request
    xff      defaults, the same headers (client, scheme and host change)

on/off is the cost of the check; xff/off-xff the cost of applying the
headers (both arms parse the same bytes and pass the same environ keys).
Interleaved rounds; server CPU-seconds per request from /proc over the
server's process tree (master + worker), wrk at saturation.

    python3 bench/proxy-cost/run.py --rounds 5 --duration 5 --bin bin/turnstile
"""
import argparse, sys, datetime, os, re, socket, statistics, subprocess, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XFF = ["-H", "X-Forwarded-For: 203.0.113.7, 127.0.0.1", "-H", "X-Forwarded-Proto: https",
       "-H", "X-Forwarded-Host: example.com"]


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
    if arm.startswith("off"):
        cmd += ["--no-proxy-headers"]
    srv = subprocess.Popen(cmd + [args.app], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close(); break
        except OSError:
            time.sleep(0.05)
    url = f"http://127.0.0.1:{port}/"
    hdrs = XFF if arm.endswith("xff") else []
    subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c64", "-d1s"] + hdrs + [url], capture_output=True)
    c0 = tree_cpu(srv.pid)
    out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c64", f"-d{args.duration}s"] + hdrs + [url],
                         capture_output=True, text=True).stdout
    c1 = tree_cpu(srv.pid)
    srv.terminate(); srv.wait(10)
    n = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rps, (c1 - c0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--app", default="hello:app")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin/turnstile"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "bench/work/venv-3.11"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--note", default="", help="a line for the header, e.g. the commit the binary was built from")
    args = ap.parse_args()
    arms = ["off", "on", "off-xff", "xff"]
    rows = []
    load0 = open("/proc/loadavg").read().strip()
    for i in range(args.rounds):
        order = arms[i % 4:] + arms[:i % 4]
        res = {arm: run(arm, args) for arm in order}
        rows.append((i, res))
        print(f"round {i}: " + ", ".join(f"{a} {res[a][0]:.0f} req/s {res[a][1]:.2f} us/req" for a in arms), flush=True)
    on = statistics.median(r["on"][1] / r["off"][1] for _, r in rows)
    xff = statistics.median(r["xff"][1] / r["off-xff"][1] for _, r in rows)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(args.out, f"proxy-cost-{stamp}.csv")
    with open(path, "w") as f:
        f.write(f"# proxy-header cost, app {args.app}, {args.rounds} interleaved rounds, wrk -t1 -c64 -d{args.duration}s\n")
        f.write(f"# command: python3 bench/proxy-cost/run.py --rounds {args.rounds} --duration {args.duration} --app {args.app} --bin {args.bin}\n")
        if args.note:
            f.write(f"# {args.note}\n")
        f.write("# server on core 1 (taskset), wrk on core 0; off = --no-proxy-headers; on = defaults, no forwarding headers;"
                " off-xff/xff = the same with X-Forwarded-For/-Proto/-Host on every request\n")
        f.write(f"# loadavg before: {load0}; after: {open('/proc/loadavg').read().strip()}\n")
        f.write(f"# {subprocess.run([args.bin, '--version'], capture_output=True, text=True).stdout.strip()}; nproc {os.cpu_count()}\n")
        f.write("round," + ",".join(f"{a}_rps,{a}_cpu_us_per_req" for a in arms) + "\n")
        for i, r in rows:
            f.write(f"{i}," + ",".join(f"{r[a][0]:.0f},{r[a][1]:.3f}" for a in arms) + "\n")
        f.write(f"# median CPU/request ratio on/off: {on:.4f}; xff/off-xff: {xff:.4f}\n")
    print(f"median ratio on/off {on:.4f}, xff/off-xff {xff:.4f}; wrote {path}")


if __name__ == "__main__":
    main()
