#!/usr/bin/env python3
"""Static files: turnstile --static against nginx, Granian's static mounts and
uvicorn + Starlette StaticFiles, for a 1 KiB and a 1 MiB file.

Every server serves the same directory (bench/work/static-files) at /static,
one process (nginx: master + 1 worker), under taskset -c 1; wrk -t1 under
taskset -c 0 at --conns connections. --reps repetitions; in each, every
file size and every server once, the server order rotated by one per
repetition; a fresh server per run, a discarded --warmup of wrk first, the
body checked before measuring. Records req/s, wrk p50/p99, server CPU µs per
request (/proc, whole process tree) and the CPU of everything else
(others_cores; a run over --noise-max is kept but marked valid=0 and left
out of the medians), into bench/results/static-<stamp>.{csv,meta.txt}.
"""

import argparse
import csv
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {"1k": 1024, "1m": 1 << 20}
SERVERS = ["turnstile", "nginx", "granian", "uvicorn-starlette"]
FIELDS = ["rep", "server", "file", "bytes", "conns", "duration_s", "requests", "rps", "errors", "p50_ms",
          "p99_ms", "server_cpu_s", "cpu_us_per_req", "others_cores", "server_core_busy",
          "client_core_busy", "valid", "loadavg_before", "started_utc"]

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {host}:{port};
        location /static/ {{ alias {dir}/; }}
    }}
}}
"""


def make_files(root):
    d = os.path.join(root, "static")
    os.makedirs(d, exist_ok=True)
    for name, size in FILES.items():
        p = os.path.join(d, name + ".bin")
        if not os.path.exists(p) or os.path.getsize(p) != size:
            with open(p, "wb") as f:
                f.write(os.urandom(size))
    return d


def server_argv(kind, tbin, venv, port, static_dir, tmp):
    """argv, env_extra, cwd for one server."""
    apps = os.path.join(T.BENCH, "apps")
    if kind == "turnstile":
        return ([tbin, "--venv", venv, "--app-dir", apps, "--host", T.HOST, "--port", str(port),
                 "--admin-bind", "off", "--log-level", "warning", "--static", "/static=" + static_dir,
                 "hello:app"], {}, apps)
    if kind == "nginx":
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, host=T.HOST, port=port, dir=static_dir))
        return (["nginx", "-p", tmp, "-c", conf], {}, tmp)
    if kind == "granian":
        return ([os.path.join(venv, "bin", "granian"), "--interface", "wsgi", "--workers", "1",
                 "--blocking-threads", "4", "--host", T.HOST, "--port", str(port), "--working-dir", apps,
                 "--log-level", "warning", "--no-access-log", "--static-path-route", "/static",
                 "--static-path-mount", static_dir, "hello:app"], {}, apps)
    if kind == "uvicorn-starlette":
        return ([os.path.join(venv, "bin", "uvicorn"), "--host", T.HOST, "--port", str(port), "--workers", "1",
                 "--loop", "uvloop", "--http", "httptools", "--app-dir", HERE, "--log-level", "warning",
                 "--no-access-log", "starlette_static:app"], {"STATIC_DIR": static_dir}, HERE)
    raise ValueError(kind)


def check(url, size):
    for _ in range(100):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                b = r.read()
                if r.status == 200 and len(b) == size:
                    return None
                return "status %d, %d bytes (want 200, %d)" % (r.status, len(b), size)
        except OSError as e:
            last = repr(e)
            time.sleep(0.1)
    return "not ready: " + last


def one_run(a, kind, fname, tbin, static_dir, st, commands):
    """One fresh server, a body check, a warm-up, one measured wrk run."""
    size = FILES[fname]
    T.quiet(max_wait=a.quiet_max_wait)
    port = T.R.free_port()
    tmp = tempfile.mkdtemp(prefix="static-%s-" % kind, dir=T.WORK)
    argv, env, cwd = server_argv(kind, tbin, a.venv, port, static_dir, tmp)
    srv = T.Srv(kind, argv, a.venv, cwd, os.path.join(T.WORK, "logs", "static-%s-%s.log" % (st, kind)), env)
    cmdline = T.portless(srv.cmdline(), (port, "PORT")).replace(tbin, "bin/turnstile") \
        .replace(tmp, "TMP").replace(static_dir, "bench/work/static-files/static")
    commands.setdefault(kind, cmdline)
    row = dict(server=kind, file=fname, bytes=size, conns=a.conns, duration_s=a.duration)
    try:
        url = "http://%s:%d/static/%s.bin" % (T.HOST, port, fname)
        err = check(url, size)
        if err:
            print("  %s: %s" % (kind, err), flush=True)
            row.update(errors=-1)
            return row
        if a.warmup:
            T.wrk(a.conns, a.warmup, url)
        row.update(loadavg_before=T.R.loadavg().split()[0], started_utc=T.R.utcnow())
        k0 = T.Mark(srv.proc.pid)
        wcmd, r = T.wrk(a.conns, a.duration, url)
        k1 = T.Mark(srv.proc.pid)
        commands.setdefault("wrk", T.portless(wcmd, (port, "PORT")))
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    u = T.usage(k0, k1)
    row.update(requests=r.get("requests"), rps=r.get("rps"),
               errors=r.get("socket_errors", 0) + r.get("non2xx", 0), p50_ms=r.get("p50_ms"),
               p99_ms=r.get("p99_ms"), server_cpu_s=u["server_cpu_s"],
               cpu_us_per_req=u["server_cpu_s"] / r["requests"] * 1e6 if r.get("requests") else None,
               others_cores=u["others_cores"], server_core_busy=u["server_core_busy"],
               client_core_busy=u["client_core_busy"], valid=0 if u["others_cores"] > a.noise_max else 1)
    return row


def summarize(rows, servers, files, conns, duration, reps):
    """Markdown tables from run rows: medians over every run (the same
    treatment for every server when noise invalidates most runs) and over
    the valid runs only."""
    def vals(kind, fname, key, valid_only):
        return [float(r[key]) for r in rows if r["server"] == kind and r["file"] == fname
                and r.get(key) not in (None, "") and (not valid_only or str(r["valid"]) == "1")]

    def med(kind, fname, key, valid_only=False):
        v = vals(kind, fname, key, valid_only)
        return statistics.median(v) if v else float("nan")

    out = ["static: GET /static/<file>, wrk -t1 -c%d, %d s, %d interleaved reps; server core 1, wrk core 0. "
           "Medians over all runs (valid or not: the same for every server); the valid-only median in its own "
           "column (runs with others_cores <= noise max)." % (conns, duration, reps), ""]
    for fname in files:
        base_rps, base_cpu = med("turnstile", fname, "rps"), med("turnstile", fname, "cpu_us_per_req")
        out += ["%s file (%d bytes):" % (fname, FILES[fname]), "",
                "| server | req/s | turnstile ÷ server | p50 ms | p99 ms | server CPU µs/req | server ÷ turnstile CPU "
                "| req/s, valid runs only | runs valid |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for kind in servers:
            n_all = len(vals(kind, fname, "rps", False))
            n_ok = len(vals(kind, fname, "rps", True))
            rps, cpu = med(kind, fname, "rps"), med(kind, fname, "cpu_us_per_req")
            out.append("| %s | %.0f | %.2f | %.2f | %.2f | %.1f | %.2f | %s | %d/%d |" % (
                kind, rps, base_rps / rps if rps else float("nan"), med(kind, fname, "p50_ms"),
                med(kind, fname, "p99_ms"), cpu, cpu / base_cpu if base_cpu else float("nan"),
                "%.0f" % med(kind, fname, "rps", True) if n_ok else "–", n_ok, n_all))
        out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "summarize":
        with open(sys.argv[2]) as f:
            rows = [r for r in csv.DictReader(f) if r.get("rps")]
        servers = [s for s in SERVERS if any(r["server"] == s for r in rows)]
        files = [f for f in FILES if any(r["file"] == f for r in rows)]
        r0 = rows[0]
        print(summarize(rows, servers, files, int(r0["conns"]), int(r0["duration_s"]),
                        max(int(r["rep"]) for r in rows)))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument("--files", default=",".join(FILES))
    p.add_argument("--venv", default=T.default_venv())
    p.add_argument("--noise-max", type=float, default=0.10)
    p.add_argument("--noise-retries", type=int, default=1, help="repeat a noisy run up to N times (all rows kept)")
    p.add_argument("--quiet-max-wait", type=float, default=20,
                   help="seconds to wait before each run for both cores to be under 25%% busy")
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    a = p.parse_args()
    servers, files = a.servers.split(","), a.files.split(",")
    os.makedirs(a.out, exist_ok=True)
    tbin, tinfo = T.snapshot_turnstile()
    static_dir = make_files(os.path.join(T.WORK, "static-files"))
    st = T.stamp()
    base = os.path.join(a.out, "static-%s" % st)
    load_before, started = T.R.loadavg(), T.R.utcnow()
    rows, commands = [], {}
    with open(base + ".csv", "w", newline="") as csvf:
        w = csv.DictWriter(csvf, FIELDS, extrasaction="ignore")
        w.writeheader()
        for rep in range(1, a.reps + 1):
            k = (rep - 1) % len(servers)
            order = servers[k:] + servers[:k]
            for fname in files:
                for kind in order:
                    for attempt in range(1 + a.noise_retries):
                        row = one_run(a, kind, fname, tbin, static_dir, st, commands)
                        row["rep"] = rep
                        w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in row.items()})
                        csvf.flush()
                        if row.get("errors") == -1:
                            break
                        rows.append(row)
                        print("  rep %d %-3s %-18s %9.0f req/s  p99 %7.2f ms  %7.1f cpu-µs/req  others %.2f%s" % (
                            rep, fname, kind, row["rps"] or 0, row["p99_ms"] or 0, row["cpu_us_per_req"] or 0,
                            row["others_cores"], "" if row["valid"] else " (noisy)"), flush=True)
                        if row["valid"]:
                            break

    summary = summarize(rows, servers, files, a.conns, a.duration, a.reps)
    print("\n" + summary)
    T.write_meta(base + ".meta.txt", "static — turnstile --static vs nginx, granian static mounts, uvicorn+Starlette "
                 "StaticFiles (issue 9)", commands, [
                     "files: bench/work/static-files/static/{1k,1m}.bin, random bytes, made by run.py",
                     "nginx: %s, config written per run (bench/static/run.py NGINX_CONF): worker_processes 1, "
                     "sendfile on, tcp_nopush on, access_log off, keepalive_requests 1000000, "
                     "location /static/ { alias DIR/; }" % T.R.sh(["nginx", "-v"]).strip(),
                     "uvicorn app: bench/static/starlette_static.py (Starlette Mount + StaticFiles); uvicorn, "
                     "starlette: %s" % T.R.sh([os.path.join(a.venv, "bin", "python"), "-c",
                                               "import uvicorn, starlette; print(uvicorn.__version__, "
                                               "starlette.__version__)"]),
                     "turnstile and granian serve the static mount in front of the WSGI hello app (bench/apps/hello.py)",
                     "%d reps, order rotated per rep, warm-up %ds discarded, fresh server per run, body length "
                     "checked before measuring; before each run wait up to %gs for both cores under 25%% busy; "
                     "a run with others_cores > %g is kept as valid=0 and repeated up to %d times"
                     % (a.reps, a.warmup, a.quiet_max_wait, a.noise_max, a.noise_retries),
                 ], a.venv, tinfo, load_before, started, summary)
    os.unlink(tbin)
    print("\nwrote %s.{csv,meta.txt}" % base)


if __name__ == "__main__":
    main()
