#!/usr/bin/env python3
"""Barrier cost (issue 4): server CPU-seconds per request with the turnstile
on vs TURNSTILE_POOL_TURN=0, on hello and JSON (bench/apps), --pairs
interleaved on/off pairs (order alternated), wrk -t1 -cCONNS -dDURATION,
4 threads. Target: median cost ratio on/off <= 1.05."""

import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

FIELDS = ["app", "pair", "arm", "conns", "requests", "rps", "errors", "server_cpu_s", "cpu_us_per_req",
          "others_cores", "valid", "loadavg_before", "started_utc"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--apps", default="hello,jsonapp")
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--noise-max", type=float, default=0.10)
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    p.add_argument("--venv", default=T.default_venv())
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    st = T.stamp()
    base = os.path.join(a.out, "barrier-cost-%s" % st)
    tbin, tinfo = T.snapshot_turnstile()
    load_before, started = T.R.loadavg(), T.R.utcnow()
    rows, commands = [], {}
    apps_dir = os.path.join(T.BENCH, "apps")
    with open(base + ".csv", "w", newline="") as csvf:
        w = csv.DictWriter(csvf, FIELDS, extrasaction="ignore")
        w.writeheader()
        for pair in range(1, a.pairs + 1):
            for app in a.apps.split(","):
                for arm in (("turnstile", "turnstile-off") if pair % 2 else ("turnstile-off", "turnstile")):
                    T.quiet()
                    log = os.path.join(T.WORK, "logs", "barrier-cost-%s-%s.log" % (st, arm))
                    srv, port, _ = T.make_server(arm, tbin, a.venv, apps_dir, app + ":app", 4, log)
                    try:
                        if srv.wait_ready(port, "/"):
                            print("  %s failed to start" % arm)
                            continue
                        commands.setdefault("%s %s" % (arm, app), T.portless(srv.cmdline(), (port, "PORT")))
                        url = "http://%s:%d/" % (T.HOST, port)
                        T.wrk(a.conns, a.warmup, url)
                        row = dict(app=app, pair=pair, arm=arm, conns=a.conns,
                                   loadavg_before=T.R.loadavg().split()[0], started_utc=T.R.utcnow())
                        k0 = T.Mark(srv.proc.pid)
                        cmd, r = T.wrk(a.conns, a.duration, url)
                        k1 = T.Mark(srv.proc.pid)
                        commands.setdefault("wrk", T.portless(cmd, (port, "PORT")))
                    finally:
                        srv.stop()
                    u = T.usage(k0, k1)
                    row.update(requests=r.get("requests"), rps=r.get("rps"),
                               errors=r.get("socket_errors", 0) + r.get("non2xx", 0),
                               server_cpu_s=u["server_cpu_s"],
                               cpu_us_per_req=u["server_cpu_s"] / r["requests"] * 1e6 if r.get("requests") else None,
                               others_cores=u["others_cores"], valid=0 if u["others_cores"] > a.noise_max else 1)
                    rows.append(row)
                    w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in row.items()})
                    print("  pair %d %-8s %-13s %8.0f req/s %6.2f cpu-µs/req others %.2f%s" % (
                        pair, app, arm, row["rps"] or 0, row["cpu_us_per_req"] or 0, row["others_cores"],
                        "" if row["valid"] else " (noisy)"), flush=True)
    out = ["Barrier cost: turnstile on vs TURNSTILE_POOL_TURN=0, wrk -t1 -c%d -d%ds, 4 threads, %d interleaved pairs."
           % (a.conns, a.duration, a.pairs), "",
           "| app | on req/s | off req/s | on CPU µs/req | off CPU µs/req | median per-pair ratio on/off | "
           "pairs (both valid / all) |", "|---|---:|---:|---:|---:|---:|---|"]
    verdicts = []
    for app in a.apps.split(","):
        ratios, ratios_all = [], []
        for pair in range(1, a.pairs + 1):
            x = {r["arm"]: r for r in rows if r["app"] == app and r["pair"] == pair}
            if "turnstile" in x and "turnstile-off" in x and x["turnstile-off"]["cpu_us_per_req"]:
                ratio = x["turnstile"]["cpu_us_per_req"] / x["turnstile-off"]["cpu_us_per_req"]
                ratios_all.append(ratio)
                if x["turnstile"]["valid"] and x["turnstile-off"]["valid"]:
                    ratios.append(ratio)
        use = ratios or ratios_all

        def med(arm, key):
            v = [r[key] for r in rows if r["app"] == app and r["arm"] == arm and r.get(key)]
            return statistics.median(v) if v else float("nan")
        mr = statistics.median(use) if use else float("nan")
        out.append("| %s | %.0f | %.0f | %.2f | %.2f | %.3f | %d / %d |" % (
            app, med("turnstile", "rps"), med("turnstile-off", "rps"), med("turnstile", "cpu_us_per_req"),
            med("turnstile-off", "cpu_us_per_req"), mr, len(ratios), len(ratios_all)))
        verdicts.append("%s  barrier cost on %s: median CPU/req ratio on/off %.3f <= 1.05%s" % (
            "PASS" if mr <= 1.05 else "FAIL", app, mr, "" if ratios else " (no pair with both runs valid: all pairs)"))
    summary = "\n".join(out + [""] + verdicts)
    print("\n" + summary)
    T.write_meta(base + ".meta.txt", "barrier-cost — issue 4: turnstile on/off CPU per request", commands, [
        "%d pairs per app, arm order alternated, warm-up %ds, fresh server per run; ratio per pair, median over "
        "pairs with both runs valid (others_cores <= %.2f)" % (a.pairs, a.warmup, a.noise_max),
    ], a.venv, tinfo, load_before, started, summary)
    print("\nwrote %s.{csv,meta.txt}" % base)
    os.unlink(tbin)


if __name__ == "__main__":
    main()
