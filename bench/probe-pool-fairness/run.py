#!/usr/bin/env python3
"""Pool-fairness probe (issue 4, DESIGN.md "The turnstile").

16 connections on /busy?ms=0.3 (0.3 ms of pure-Python CPU per request) with
4 Python threads, in one run and interleaved:

  turnstile      the turnstile on (default)
  turnstile-off  TURNSTILE_POOL_TURN=0 (no barrier, no GIL-aware wake-up)
  granian        --interface wsgi --blocking-threads 4      (control)
  uwsgi          --http-socket, 1 process x 4 threads         (control)

Phase 1 (saturation): wrk -t1 -c16 on core 0 for --duration s: req/s, and
for turnstile the delta of the server's own turnstile_gil_wait_seconds
histogram over exactly that wrk run (scraped from the admin listener just
before and just after). Phase 2 (latency): vegeta, open loop at a fixed rate
(--rate-frac of the slowest arm's median wrk capacity), at most 16
connections: request p50/p99/p99.9; GIL-wait delta again.

Pass/fail (issue 4): barrier arm p99 GIL wait <= 2 slices (2 ms); off arm
p99 GIL wait >= the switch interval (5 ms); barrier arm request p99 < 15 ms;
off arm request p99 <= 1.5x Granian's or uWSGI's. GIL-wait p99 is
histogram_quantile's linear interpolation inside the bucket (the bucket
bounds are printed too). The GIL-wait verdicts are taken from the wrk phase
(16 busy connections, the convoy condition); the request-p99 verdicts from
the vegeta phase.

Then "not a mutex in disguise": /sleep?s=0.05 with 4 threads vs 1 thread,
wrk -c16, throughput ratio >= 3.5.
"""

import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SLICE_MS = 1.0
SWITCH_MS = 5.0
GIL = "turnstile_gil_wait_seconds"
FIELDS = ["phase", "rep", "arm", "threads", "path", "conns", "rate", "duration_s", "requests", "rps",
          "errors", "p50_ms", "p99_ms", "p999_ms", "max_ms", "gil_n", "gil_p50_ms", "gil_p99_ms",
          "gil_p99_bucket_ms", "gil_share_le_2ms", "barrier_yields", "server_cpu_s", "cpu_us_per_req",
          "others_cores", "valid", "loadavg_before", "started_utc"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arms", default="turnstile,turnstile-off,granian,uwsgi")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--ms", default="0.3")
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--rate-frac", type=float, default=0.8)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--mutex-reps", type=int, default=3)
    p.add_argument("--noise-max", type=float, default=0.10)
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    p.add_argument("--venv", default=T.default_venv())
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    arms = a.arms.split(",")
    st = T.stamp()
    base = os.path.join(a.out, "probe-pool-fairness-%s" % st)
    tbin, tinfo = T.snapshot_turnstile()
    load_before, started = T.R.loadavg(), T.R.utcnow()
    csvf = open(base + ".csv", "w", newline="")
    w = csv.DictWriter(csvf, FIELDS, extrasaction="ignore")
    w.writeheader()
    rows, commands = [], {}
    busy = "/busy?ms=%s" % a.ms

    def one(phase, rep, arm, threads=a.threads, path=busy, rate=0):
        waited = T.quiet()
        log = os.path.join(T.WORK, "logs", "probe-%s-%s.log" % (st, arm))
        srv, port, admin = T.make_server(arm, tbin, a.venv, HERE, "busyapp:app", threads, log, admin=True)
        row = dict(phase=phase, rep=rep, arm=arm, threads=threads, path=path, conns=a.conns, rate=rate,
                   duration_s=a.duration, loadavg_before=T.R.loadavg().split()[0], started_utc=T.R.utcnow())
        try:
            err = srv.wait_ready(port, "/")
            if err:
                print("  %s failed to start: %s" % (arm, err), flush=True)
                row.update(errors=-1)
                return row
            commands.setdefault("%s (%d threads)" % (arm, threads),
                                T.portless(srv.cmdline(), (admin, "ADMIN"), (port, "PORT")))
            url = "http://%s:%d%s" % (T.HOST, port, path)
            if phase == "latency":
                if a.warmup:
                    T.vegeta(rate, a.warmup, url, os.path.join(T.WORK, "probe-warm-%d.bin" % os.getpid()),
                             max_conns=a.conns)
            elif a.warmup:
                T.wrk(a.conns, a.warmup, url)
            m0 = admin and T.scrape(admin)
            k0 = T.Mark(srv.proc.pid)
            if phase == "latency":
                cmd, r = T.vegeta(rate, a.duration, url, os.path.join(T.WORK, "probe-%d.bin" % os.getpid()),
                                  max_conns=a.conns)
                commands.setdefault("vegeta", T.portless(cmd, (port, "PORT")))
                if "error" in r:
                    row.update(errors=-1)
                    print("  vegeta failed: %s" % r["error"])
                    return row
                row.update(requests=r["requests"], rps=r["achieved_rate"], errors=r["errors"],
                           p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], p999_ms=r["p999_ms"], max_ms=r["max_ms"])
                ok = r["ok"]
            else:
                cmd, r = T.wrk(a.conns, a.duration, url)
                commands.setdefault("wrk", T.portless(cmd, (port, "PORT")))
                errs = r.get("socket_errors", 0) + r.get("non2xx", 0)
                if arm == "uwsgi":  # connection per request: wrk counts none as errors with Connection: close
                    pass
                row.update(requests=r.get("requests"), rps=r.get("rps"), errors=errs,
                           p50_ms=r.get("p50_ms"), p99_ms=r.get("p99_ms"), max_ms=r.get("max_ms"))
                ok = r.get("requests") or 0
            k1 = T.Mark(srv.proc.pid)
            u = T.usage(k0, k1)
            row.update(server_cpu_s=u["server_cpu_s"], others_cores=u["others_cores"],
                       cpu_us_per_req=u["server_cpu_s"] / ok * 1e6 if ok else float("nan"))
            if admin:
                m1 = T.scrape(admin)
                d = T.hist_delta(T.hist(m0, GIL), T.hist(m1, GIL))
                q99, lo, hi, n = T.hist_quantile(d, 0.99)
                q50 = T.hist_quantile(d, 0.50)[0]
                row.update(gil_n=int(n), gil_p50_ms=q50 * 1e3, gil_p99_ms=q99 * 1e3,
                           gil_p99_bucket_ms="%g-%g" % (lo * 1e3, hi * 1e3),
                           gil_share_le_2ms=T.share_le(d, 2 * SLICE_MS / 1e3),
                           barrier_yields=T.counter(m1, "turnstile_barrier_yields_total")
                           - T.counter(m0, "turnstile_barrier_yields_total"))
        finally:
            srv.stop()
        row["valid"] = 0 if (row.get("others_cores", 0) or 0) > a.noise_max else 1
        print("  %-8s rep %d %-13s t=%d %s rps %7.0f p50 %6.2f p99 %6.2f ms%s  others %.2f%s" % (
            phase, rep, arm, threads, path, row.get("rps") or 0, row.get("p50_ms") or 0, row.get("p99_ms") or 0,
            "  GIL p99 %.2f ms [%s] n=%d yields %d" % (row["gil_p99_ms"], row["gil_p99_bucket_ms"], row["gil_n"],
                                                       row["barrier_yields"]) if "gil_n" in row else "",
            row.get("others_cores", 0), "" if row["valid"] else "  (noisy)"), flush=True)
        return row

    def rec(row):
        rows.append(row)
        w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in row.items()})
        csvf.flush()

    def run_retry(*args, **kw):
        row = one(*args, **kw)
        if not row.get("valid", 1) and row.get("errors") != -1:
            rec(row)
            row = one(*args, **kw)
        rec(row)

    print("saturation: wrk -c%d %s, %d reps x %s, %ds" % (a.conns, busy, a.reps, a.arms, a.duration), flush=True)
    for rep in range(1, a.reps + 1):
        k = (rep - 1) % len(arms)
        for arm in arms[k:] + arms[:k]:
            run_retry("saturation", rep, arm)

    def med(arm, phase, key, **m):
        v = [float(r[key]) for r in rows if r["arm"] == arm and r["phase"] == phase and r.get("valid")
             and r.get(key) not in (None, "") and r.get("errors") != -1
             and all(r.get(kk) == vv for kk, vv in m.items())]
        if not v:  # every run noisy: fall back to all of them, flagged in the table
            v = [float(r[key]) for r in rows if r["arm"] == arm and r["phase"] == phase
                 and r.get(key) not in (None, "") and r.get("errors") != -1
                 and all(r.get(kk) == vv for kk, vv in m.items())]
        return statistics.median(v) if v else float("nan")

    caps = {arm: med(arm, "saturation", "rps", threads=a.threads, path=busy) for arm in arms}
    rate = a.rate or int(a.rate_frac * min(c for c in caps.values() if c == c))
    print("latency: vegeta at %d req/s (%.2f x slowest capacity), <= %d connections" % (rate, a.rate_frac, a.conns),
          flush=True)
    for rep in range(1, a.reps + 1):
        k = (rep - 1) % len(arms)
        for arm in arms[k:] + arms[:k]:
            run_retry("latency", rep, arm, rate=rate)

    mutex = "/sleep?s=0.05"
    if a.mutex_reps:
        print("mutex check: wrk -c%d %s, turnstile 4 vs 1 thread" % (a.conns, mutex), flush=True)
        for rep in range(1, a.mutex_reps + 1):
            for th in ((4, 1) if rep % 2 else (1, 4)):
                run_retry("mutex", rep, "turnstile", threads=th, path=mutex)
    csvf.close()

    # ------------------------------------------------------------ summary
    def cnt(arm, phase):
        return "%d/%d" % (sum(1 for r in rows if r["arm"] == arm and r["phase"] == phase and r.get("valid")),
                          sum(1 for r in rows if r["arm"] == arm and r["phase"] == phase))
    out = []
    out.append("Probe: %s with %d threads, %d connections; medians of %d interleaved reps, %ds each; "
               "server on core 1, client on core 0." % (busy, a.threads, a.conns, a.reps, a.duration))
    out.append("")
    out.append("| arm | wrk req/s | wrk p99 ms | GIL wait p50 ms (wrk) | GIL wait p99 ms (wrk) | share ≤ 2 ms | "
               "barrier yields/s | vegeta @%d/s p50 ms | p99 ms | p99.9 ms | CPU µs/req | runs (sat, lat) |" % rate)
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    res = {}
    for arm in arms:
        g = arm.startswith("turnstile")
        res[arm] = dict(rps=caps[arm], gil99=med(arm, "saturation", "gil_p99_ms") if g else float("nan"),
                        gil50=med(arm, "saturation", "gil_p50_ms") if g else float("nan"),
                        share=med(arm, "saturation", "gil_share_le_2ms") if g else float("nan"),
                        ys=med(arm, "saturation", "barrier_yields") / a.duration if g else float("nan"),
                        gil99_lat=med(arm, "latency", "gil_p99_ms") if g else float("nan"),
                        wrk99=med(arm, "saturation", "p99_ms"),
                        p50=med(arm, "latency", "p50_ms"), p99=med(arm, "latency", "p99_ms"),
                        p999=med(arm, "latency", "p999_ms"), cpu=med(arm, "saturation", "cpu_us_per_req"))
        r = res[arm]
        f = lambda v, s="%.2f": "–" if v != v else s % v  # noqa: E731
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s, %s |" % (
            arm, f(r["rps"], "%.0f"), f(r["wrk99"]), f(r["gil50"], "%.3f"), f(r["gil99"]),
            f(r["share"] * 100 if r["share"] == r["share"] else float("nan"), "%.1f %%"), f(r["ys"], "%.0f"),
            f(r["p50"]), f(r["p99"]), f(r["p999"]), f(r["cpu"], "%.0f"),
            cnt(arm, "saturation"), cnt(arm, "latency")))
    out.append("")
    out.append("GIL wait = the server's turnstile_gil_wait_seconds histogram, delta over the measured run, "
               "p99 by linear interpolation inside its bucket (buckets double from 10 µs: …, 1.28, 2.56, 5.12, "
               "10.24 ms). GIL wait p99 in the vegeta phase: %s." % ", ".join(
                   "%s %.2f ms" % (arm, res[arm]["gil99_lat"]) for arm in arms if arm.startswith("turnstile")))
    verdicts = []

    def verdict(ok, text):
        verdicts.append("%s  %s" % ("PASS" if ok else "FAIL", text))

    if "turnstile" in res:
        v = res["turnstile"]["gil99"]
        verdict(v <= 2 * SLICE_MS, "barrier arm p99 GIL wait %.2f ms <= 2 slices (%.0f ms)" % (v, 2 * SLICE_MS))
    if "turnstile-off" in res:
        v = res["turnstile-off"]["gil99"]
        verdict(v >= SWITCH_MS, "off arm p99 GIL wait %.2f ms >= switch interval (%.0f ms): the probe sees the convoy"
                % (v, SWITCH_MS))
    if "turnstile" in res:
        v = res["turnstile"]["p99"]
        verdict(v < 15, "barrier arm request p99 %.2f ms < 15 ms (vegeta, %d req/s)" % (v, rate))
    ctrl = [c for c in ("granian", "uwsgi") if c in res and res[c]["p99"] == res[c]["p99"]]
    if "turnstile-off" in res and ctrl:
        v = res["turnstile-off"]["p99"]
        parts = ["%s %.2f ms (%.2fx)" % (c, res[c]["p99"], v / res[c]["p99"]) for c in ctrl]
        verdict(any(v <= 1.5 * res[c]["p99"] for c in ctrl),
                "off arm request p99 %.2f ms within 1.5x of a control's: %s" % (v, ", ".join(parts)))
    if a.mutex_reps:
        r4 = med("turnstile", "mutex", "rps", threads=4, path=mutex)
        r1 = med("turnstile", "mutex", "rps", threads=1, path=mutex)
        out.append("")
        out.append("Not a mutex: %s, wrk -c%d, turnstile (barrier on): 4 threads %.1f req/s, 1 thread %.1f req/s, "
                   "ratio %.2f (medians of %d reps)." % (mutex, a.conns, r4, r1, r4 / r1 if r1 else float("nan"),
                                                         a.mutex_reps))
        verdict(r1 > 0 and r4 / r1 >= 3.5, "not a mutex: 4 threads / 1 thread = %.2f >= 3.5" % (r4 / r1 if r1 else 0))
    out.append("")
    out += verdicts
    summary = "\n".join(out)
    print("\n" + summary)
    T.write_meta(base + ".meta.txt", "probe-pool-fairness — issue 4's probe of the turnstile", commands, [
        "reps %d interleaved (arm order rotated by one per rep), duration %ds, warm-up %ds, fresh server per run" % (
            a.reps, a.duration, a.warmup),
        "latency rate: %d req/s = %.2f x the slowest arm's median wrk capacity (or --rate), vegeta "
        "-connections/-max-connections %d" % (rate, a.rate_frac, a.conns),
        "GIL wait: turnstile_gil_wait_seconds bucket counts (summed over the worker label) scraped from the "
        "admin listener before/after the measured run; delta; p99 = histogram_quantile interpolation",
        "noise: runs with others_cores > %.2f are valid=0 and repeated once; medians use valid runs "
        "(all runs when a cell has none)" % a.noise_max,
        "app: bench/probe-pool-fairness/busyapp.py; /busy spins until time.thread_time() advanced by ms",
    ], a.venv, tinfo, load_before, started, summary)
    print("\nwrote %s.{csv,meta.txt}" % base)
    os.unlink(tbin)


if __name__ == "__main__":
    main()
