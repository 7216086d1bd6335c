#!/usr/bin/env python3
"""Go-only hello: turnstile's internal/http1 against net/http (bench/front/main.go).

Builds bench/front once, then --pairs interleaved pairs (order alternated per
pair): the server under taskset -c 1, a discarded --warmup s of wrk, then
wrk -t1 -c CONNS -d DURATION --latency under taskset -c 0. Records req/s,
wrk p50/p99 and the server's CPU µs per request (/proc), medians and the
http1/nethttp ratio, into bench/results/front-<stamp>.{csv,meta.txt}.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

FIELDS = ["pair", "impl", "conns", "duration_s", "requests", "rps", "errors", "p50_ms", "p99_ms",
          "server_cpu_s", "cpu_us_per_req", "others_cores", "valid", "loadavg_before", "started_utc"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--noise-max", type=float, default=0.10)
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    binp = os.path.join(T.WORK, "front-%d" % os.getpid())
    subprocess.run(["go", "build", "-o", binp, "./front"], cwd=T.BENCH, check=True)  # bench/ is its own module
    st = T.stamp()
    base = os.path.join(a.out, "front-%s" % st)
    load_before, started = T.R.loadavg(), T.R.utcnow()
    rows, commands = [], {}
    with open(base + ".csv", "w", newline="") as csvf:
        w = csv.DictWriter(csvf, FIELDS, extrasaction="ignore")
        w.writeheader()
        for pair in range(1, a.pairs + 1):
            for impl in (("http1", "nethttp") if pair % 2 else ("nethttp", "http1")):
                T.quiet()
                port = T.R.free_port()
                cmd = ["taskset", "-c", str(T.SERVER_CORE), binp, "-impl", impl, "-addr", "%s:%d" % (T.HOST, port)]
                commands.setdefault(impl, T.portless(cmd, (port, "PORT")).replace(binp, "bench/work/front"))
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    url = "http://%s:%d/" % (T.HOST, port)
                    for _ in range(50):
                        try:
                            import urllib.request
                            urllib.request.urlopen(url, timeout=1).read()
                            break
                        except OSError:
                            time.sleep(0.1)
                    if a.warmup:
                        T.wrk(a.conns, a.warmup, url)
                    row = dict(pair=pair, impl=impl, conns=a.conns, duration_s=a.duration,
                               loadavg_before=T.R.loadavg().split()[0], started_utc=T.R.utcnow())
                    k0 = T.Mark(proc.pid)
                    wcmd, r = T.wrk(a.conns, a.duration, url)
                    k1 = T.Mark(proc.pid)
                    commands.setdefault("wrk", T.portless(wcmd, (port, "PORT")))
                finally:
                    proc.terminate()
                    proc.wait(10)
                u = T.usage(k0, k1)
                row.update(requests=r.get("requests"), rps=r.get("rps"),
                           errors=r.get("socket_errors", 0) + r.get("non2xx", 0), p50_ms=r.get("p50_ms"),
                           p99_ms=r.get("p99_ms"), server_cpu_s=u["server_cpu_s"],
                           cpu_us_per_req=u["server_cpu_s"] / r["requests"] * 1e6 if r.get("requests") else None,
                           others_cores=u["others_cores"], valid=0 if u["others_cores"] > a.noise_max else 1)
                rows.append(row)
                w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in row.items()})
                print("  pair %d %-8s %9.0f req/s  p99 %6.2f ms  %5.1f cpu-µs/req  others %.2f%s" % (
                    pair, impl, row["rps"] or 0, row["p99_ms"] or 0, row["cpu_us_per_req"] or 0,
                    row["others_cores"], "" if row["valid"] else " (noisy)"), flush=True)
    os.unlink(binp)

    def med(impl, key):
        sel = [r for r in rows if r["impl"] == impl and r.get(key) is not None]
        v = [r[key] for r in sel if r["valid"]] or [r[key] for r in sel]
        return statistics.median(v) if v else float("nan")

    def nvalid(impl):
        return "%d/%d" % (sum(1 for r in rows if r["impl"] == impl and r["valid"]),
                          sum(1 for r in rows if r["impl"] == impl))
    out = ["front: Go-only hello, wrk -t1 -c%d, %d s, %d interleaved pairs; server core 1, wrk core 0. "
           "Medians of valid runs (all runs if none valid)." % (a.conns, a.duration, a.pairs), "",
           "| impl | req/s | vs net/http | p50 ms | p99 ms | server CPU µs/req | vs net/http | runs valid |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    b_rps, b_cpu = med("nethttp", "rps"), med("nethttp", "cpu_us_per_req")
    for impl in ("http1", "nethttp"):
        out.append("| %s | %.0f | %.2f× | %.2f | %.2f | %.1f | %.2f× | %s |" % (
            impl, med(impl, "rps"), med(impl, "rps") / b_rps, med(impl, "p50_ms"), med(impl, "p99_ms"),
            med(impl, "cpu_us_per_req"), med(impl, "cpu_us_per_req") / b_cpu, nvalid(impl)))
    pr = []
    for pair in range(1, a.pairs + 1):
        x = {r["impl"]: r for r in rows if r["pair"] == pair}
        if "http1" in x and "nethttp" in x and x["nethttp"]["rps"]:
            pr.append(x["http1"]["rps"] / x["nethttp"]["rps"])
    out.append("")
    out.append("Per-pair req/s ratio http1/nethttp: %s (median %.2f)." % (
        ", ".join("%.2f" % v for v in pr), statistics.median(pr) if pr else float("nan")))
    summary = "\n".join(out)
    print("\n" + summary)
    T.write_meta(base + ".meta.txt", "front — internal/http1 vs net/http, Go-only hello (issue 3)", commands, [
        "cd bench && go build -o work/front ./front (at the repo state in 'repo' above)",
        "%d pairs, order alternated, warm-up %ds discarded, fresh server per run" % (a.pairs, a.warmup),
    ], T.default_venv(), "not used (Go-only)", load_before, started, summary)
    print("\nwrote %s.{csv,meta.txt}" % base)


if __name__ == "__main__":
    main()
