#!/usr/bin/env python3
"""Mixed workload (issue 4) and case B34: a fast route under open-loop load
while 0, 1, 2 slow requests are kept in flight.

For each repetition and each server (order rotated per rep; a fresh server
per rep), the server is warmed on the fast route, then for each config
(slow=0 first, then each slow path x each count) a small client loop
(slowloop.py, on core 0) keeps that many slow requests in flight while
vegeta sends the fast route at a fixed rate (at most --conns connections)
for --duration s. Fast-route rps, p50, p99, p99.9, max, errors per config.

  mixed (default): bench/mixed/mixedapp.py (Django), fast /, slow
                   /slow-sleep (time.sleep(0.2)) and /slow-cpu (200 ms CPU),
                   counts 0,1,2, 4 threads.
  B34:             --name b34 --app b34app:app --fast /io --slow /cpu
                   --counts 0,2 --rate 50 --duration 20 --threads 8

Targets (issue 4), per server: sleeping slow views keep fast p99 <= 2x its
slow=0 value; CPU slow views keep it <= slow=0 + 2 switch intervals (10 ms).
B34 (docs/cases.md): /io p99 < 10 x baseline + 20 ms, max < 1 s, 0 errors.
"""

import argparse
import csv
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SWITCH_MS = 5.0
FIELDS = ["rep", "server", "slow_path", "slow_n", "rate", "duration_s", "requests", "ok", "rps", "errors",
          "error_detail", "p50_ms", "p99_ms", "p999_ms", "max_ms", "gil_p99_ms", "slow_done", "server_cpu_s",
          "others_cores", "valid", "loadavg_before", "started_utc"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", default="mixed")
    p.add_argument("--app", default="mixedapp:app")
    p.add_argument("--fast", default="/")
    p.add_argument("--slow", default="/slow-sleep,/slow-cpu")
    p.add_argument("--counts", default="0,1,2")
    p.add_argument("--servers", default="turnstile,turnstile-off,granian,gunicorn,uwsgi")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--rate", type=int, default=200)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--duration", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--settle", type=float, default=0.5, help="s between starting the slow loop and measuring")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--noise-max", type=float, default=0.10)
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    p.add_argument("--venv", default=T.default_venv())
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    servers = a.servers.split(",")
    counts = [int(x) for x in a.counts.split(",")]
    configs = [("-", 0)] if 0 in counts else []
    configs += [(sp, n) for sp in a.slow.split(",") for n in counts if n > 0]
    st = T.stamp()
    base = os.path.join(a.out, "%s-%s" % (a.name, st))
    tbin, tinfo = T.snapshot_turnstile()
    load_before, started = T.R.loadavg(), T.R.utcnow()
    csvf = open(base + ".csv", "w", newline="")
    w = csv.DictWriter(csvf, FIELDS, extrasaction="ignore")
    w.writeheader()
    rows, commands = [], {}
    binf = os.path.join(T.WORK, "%s-%d.bin" % (a.name, os.getpid()))

    for rep in range(1, a.reps + 1):
        k = (rep - 1) % len(servers)
        for name in servers[k:] + servers[:k]:
            T.quiet()
            log = os.path.join(T.WORK, "logs", "%s-%s-%s.log" % (a.name, st, name))
            srv, port, admin = T.make_server(name, tbin, a.venv, HERE, a.app, a.threads, log, admin=True)
            try:
                err = srv.wait_ready(port, a.fast)
                if err:
                    print("  %s failed to start: %s" % (name, err), flush=True)
                    continue
                commands.setdefault(name, T.portless(srv.cmdline(), (admin, "ADMIN"), (port, "PORT")))
                url = "http://%s:%d%s" % (T.HOST, port, a.fast)
                if a.warmup:
                    T.vegeta(a.rate, a.warmup, url, binf, max_conns=a.conns)
                for sp, n in configs:
                    loop = None
                    if n:
                        lcmd = ["taskset", "-c", str(T.CLIENT_CORE), sys.executable, os.path.join(HERE, "slowloop.py"),
                                "http://%s:%d%s" % (T.HOST, port, sp), str(n)]
                        commands.setdefault("slow loop", T.portless(lcmd, (port, "PORT")))
                        loop = subprocess.Popen(lcmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                        time.sleep(a.settle)
                    row = dict(rep=rep, server=name, slow_path=sp, slow_n=n, rate=a.rate, duration_s=a.duration,
                               loadavg_before=T.R.loadavg().split()[0], started_utc=T.R.utcnow())
                    g0 = admin and T.scrape(admin)
                    k0 = T.Mark(srv.proc.pid)
                    cmd, r = T.vegeta(a.rate, a.duration, url, binf, max_conns=a.conns)
                    k1 = T.Mark(srv.proc.pid)
                    commands.setdefault("vegeta", T.portless(cmd, (port, "PORT")).replace(binf, "OUT.bin"))
                    if admin:
                        d = T.hist_delta(T.hist(g0, "turnstile_gil_wait_seconds"),
                                         T.hist(T.scrape(admin), "turnstile_gil_wait_seconds"))
                        row["gil_p99_ms"] = T.hist_quantile(d, 0.99)[0] * 1e3
                    if loop:
                        loop.send_signal(signal.SIGTERM)
                        out = loop.communicate(timeout=120)[0].decode()
                        row["slow_done"] = out.strip().splitlines()[-1] if out.strip() else ""
                    u = T.usage(k0, k1)
                    if "error" in r:
                        row.update(errors=-1, error_detail=r["error"])
                    else:
                        row.update(requests=r["requests"], ok=r["ok"], rps=r["ok"] / a.duration,
                                   errors=r["errors"], error_detail=r["errors_detail"], p50_ms=r["p50_ms"],
                                   p99_ms=r["p99_ms"], p999_ms=r["p999_ms"], max_ms=r["max_ms"])
                    row.update(server_cpu_s=u["server_cpu_s"], others_cores=u["others_cores"],
                               valid=0 if u["others_cores"] > a.noise_max else 1)
                    rows.append(row)
                    w.writerow({kk: ("%.6g" % v if isinstance(v, float) else v) for kk, v in row.items()})
                    csvf.flush()
                    print("  rep %d %-13s slow %-11s x%d  fast: %6.1f rps p50 %7.2f p99 %7.2f p99.9 %7.2f max %7.1f ms"
                          " err %s%s  others %.2f%s" % (
                              rep, name, sp, n, row.get("rps", 0), row.get("p50_ms", 0), row.get("p99_ms", 0),
                              row.get("p999_ms", 0), row.get("max_ms", 0), row.get("errors"),
                              "  GIL p99 %.2f" % row["gil_p99_ms"] if "gil_p99_ms" in row else "",
                              row["others_cores"], "" if row["valid"] else " (noisy)"), flush=True)
                    if row.get("slow_done"):
                        print("      %s" % row["slow_done"], flush=True)
            finally:
                srv.stop()
    csvf.close()

    # ------------------------------------------------------------ summary
    def med(name, sp, n, key):
        sel = [r for r in rows if r["server"] == name and r["slow_path"] == sp and r["slow_n"] == n
               and r.get(key) is not None and r.get("errors") != -1]
        v = [float(r[key]) for r in sel if r["valid"]] or [float(r[key]) for r in sel]
        return statistics.median(v) if v else float("nan")

    def runs(name, sp, n):
        sel = [r for r in rows if r["server"] == name and r["slow_path"] == sp and r["slow_n"] == n]
        return "%d/%d" % (sum(1 for r in sel if r["valid"]), len(sel))

    out = ["%s: fast route %s at %d req/s open loop (vegeta, <= %d connections), %d s per config, %d rep(s); "
           "%d threads; slow requests kept in flight by slowloop.py; server on core 1, clients on core 0."
           % (a.name, a.fast, a.rate, a.conns, a.duration, a.reps, a.threads), "",
           "| server | slow | in flight | fast rps | p50 ms | p99 ms | p99.9 ms | max ms | errors | p99 vs slow=0 | "
           "GIL p99 ms | runs valid |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    verdicts = []
    f = lambda v, s="%.2f": "–" if v != v else s % v  # noqa: E731
    for name in servers:
        b99 = med(name, "-", 0, "p99_ms")
        for sp, n in configs:
            p99 = med(name, sp, n, "p99_ms")
            out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, sp, n, f(med(name, sp, n, "rps"), "%.0f"), f(med(name, sp, n, "p50_ms")), f(p99),
                f(med(name, sp, n, "p999_ms")), f(med(name, sp, n, "max_ms"), "%.1f"),
                f(med(name, sp, n, "errors"), "%.0f"), f(p99 / b99 if b99 else float("nan"), "%.2f×"),
                f(med(name, sp, n, "gil_p99_ms")), runs(name, sp, n)))
            if a.name == "b34" or n == 0:
                continue
            if "sleep" in sp:
                ok = p99 <= 2 * b99
                verdicts.append("%s  %s: %s x%d fast p99 %.2f ms <= 2 x slow=0 (%.2f ms)" % (
                    "PASS" if ok else "FAIL", name, sp, n, p99, 2 * b99))
            elif "cpu" in sp:
                ok = p99 <= b99 + 2 * SWITCH_MS
                verdicts.append("%s  %s: %s x%d fast p99 %.2f ms <= slow=0 + 2 switch intervals (%.2f ms)" % (
                    "PASS" if ok else "FAIL", name, sp, n, p99, b99 + 2 * SWITCH_MS))
        if a.name == "b34":
            for sp, n in configs:
                if n == 0:
                    continue
                p99, mx, er = med(name, sp, n, "p99_ms"), med(name, sp, n, "max_ms"), med(name, sp, n, "errors")
                ok = p99 < 10 * b99 + 20 and mx < 1000 and er == 0
                verdicts.append("%s  %s: B34 %s x%d /io p99 %.2f ms < 10 x baseline + 20 ms (%.2f ms), max %.1f ms "
                                "< 1 s, errors %.0f" % ("PASS" if ok else "FAIL", name, sp, n, p99,
                                                       10 * b99 + 20, mx, er))
    out += ["", "Targets are checked for every server; issue 4 binds turnstile (barrier on). "
            "Peers and the off arm are shown for comparison.", ""] + verdicts
    summary = "\n".join(out)
    print("\n" + summary)
    T.write_meta(base + ".meta.txt", "%s — fast route under slow requests (issue 4 mixed / case B34)" % a.name,
                 commands, [
                     "app: bench/mixed/%s.py; fast %s; slow %s; in flight %s" % (
                         a.app.split(":")[0], a.fast, a.slow, a.counts),
                     "reps %d; per rep and server a fresh server, warm-up %ds on the fast route, then each config: "
                     "slow loop started, %.1fs settle, vegeta %ds at %d req/s (-connections/-max-connections %d), "
                     "slow loop stopped and its in-flight requests drained" % (
                         a.reps, a.warmup, a.settle, a.duration, a.rate, a.conns),
                     "GIL p99: turnstile_gil_wait_seconds delta over the vegeta run (turnstile only)",
                     "valid=0 when others_cores > %.2f (kept; medians fall back to all runs when a cell has no "
                     "valid run)" % a.noise_max,
                 ], a.venv, tinfo, load_before, started, summary)
    print("\nwrote %s.{csv,meta.txt}" % base)
    os.unlink(tbin)


if __name__ == "__main__":
    main()
