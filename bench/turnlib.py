"""Shared pieces of the turnstile-specific benches (probe-pool-fairness,
mixed, B34, slowloris, front, h2, h3, ws-load, ws-pair, rooms).

They reuse run.py's /proc accounting, pinning and noise measurement (import
run as R) and add what run.py does not need: servers started with a custom
environment (TURNSTILE_POOL_TURN=0), the admin listener's histograms, vegeta
with a connection cap, and a .meta.txt writer.
"""

import datetime
import math
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402

BENCH, ROOT, WORK, HOST = R.BENCH, R.ROOT, R.WORK, R.HOST
VEGETA = os.path.join(WORK, "bin", "vegeta")
RESULTS = os.path.join(BENCH, "results")
SERVER_CORE, CLIENT_CORE = 1, 0


def stamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def default_venv():
    return os.path.join(WORK, "venv-3.11")


def snapshot_turnstile(src=None, tag=""):
    """Copy bin/turnstile so a rebuild by someone else cannot change it mid-run."""
    src = src or os.path.join(ROOT, "bin", "turnstile")
    real = os.path.realpath(src)
    dst = os.path.join(WORK, "turnstile-snapshot-%d%s" % (os.getpid(), tag))
    subprocess.run(["cp", real, dst], check=True)
    sha = R.sh(["sha256sum", dst]).split()[0]
    info = "%s -> %s, sha256 %s, mtime %s, --version: %s" % (
        src, real, sha, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(real))),
        R.sh([dst, "--version"]))
    return dst, info


def self_signed_cert():
    """The self-signed P-256 certificate for 127.0.0.1 that bench/h2 and
    bench/h3 serve (bench/work/h2-certs, made once; PKCS#8 key: Granian
    wants it). Returns (cert, key) paths."""
    d = os.path.join(WORK, "h2-certs")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    if not os.path.exists(cert):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


# ---------------------------------------------------------------- servers

class Srv:
    """One server process tree on the server core, with its own env."""

    def __init__(self, name, argv, venv, cwd, log, env_extra=None):
        self.name = name
        self.cmd = ["taskset", "-c", str(SERVER_CORE)] + argv
        env = R.server_env(venv)
        env.update(env_extra or {})
        self.env_extra = env_extra or {}
        os.makedirs(os.path.dirname(log), exist_ok=True)
        self.logf = open(log, "ab")
        self.logf.write(("\n# %s %s\n" % (R.utcnow(), shlex.join(self.cmd))).encode())
        self.logf.flush()
        self.logpath = log
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def cmdline(self):
        pre = " ".join("%s=%s" % kv for kv in self.env_extra.items())
        return (pre + " " if pre else "") + shlex.join(self.cmd)

    def wait_ready(self, port, path, timeout=60):
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "exited with %d" % self.proc.returncode
            try:
                with urllib.request.urlopen("http://%s:%d%s" % (HOST, port, path), timeout=5) as r:
                    r.read()
                    if r.status == 200:
                        return None
            except Exception as e:  # noqa: BLE001
                last = repr(e)
            time.sleep(0.1)
        return "not ready after %ss: %s" % (timeout, last)

    def wait_probe(self, probe, timeout=60):
        """Calls probe() every 0.2 s until it returns None (the server
        answers) or timeout seconds pass; probe returns what it saw
        otherwise. Returns None when ready, else why not: "exited with N"
        or "not ready: " + probe's last answer."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "exited with %d" % self.proc.returncode
            last = probe()
            if last is None:
                return None
            time.sleep(0.2)
        return "not ready: " + last

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.logf.close()

    def children(self):
        kids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = R.proc_stat(int(name))
                if st and st[0] == self.proc.pid:
                    kids.append(int(name))
        return kids


free_port = R.free_port


def wait_port(port, proc=None, timeout=30):
    """Waits until HOST:port accepts a TCP connection: True; False when
    proc (a Popen, if given) exits first or timeout seconds pass."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection((HOST, port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stop_proc(proc, timeout=15):
    """SIGTERM to proc (a Popen) if it still runs; after timeout seconds,
    SIGKILL to its process group when it leads one (start_new_session),
    else to proc alone."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, 9)
            else:
                proc.kill()
            proc.wait()


def turnstile_argv(binpath, venv, app_dir, port, module, threads, admin_port=None, extra=()):
    return [binpath, "--venv", venv, "--app-dir", app_dir, "--host", HOST, "--port", str(port),
            "--blocking-threads", str(threads),
            "--admin-bind", ("%s:%d" % (HOST, admin_port)) if admin_port else "off",
            "--log-level", "warning"] + list(extra) + [module]


def granian_argv(venv, app_dir, port, module, threads):
    return [os.path.join(venv, "bin", "granian"), "--interface", "wsgi", "--workers", "1",
            "--blocking-threads", str(threads), "--host", HOST, "--port", str(port),
            "--working-dir", app_dir, "--log-level", "warning", "--no-access-log", module]


def gunicorn_argv(venv, app_dir, port, module, threads):
    return [os.path.join(venv, "bin", "gunicorn"), "-k", "gthread", "-w", "1", "--threads", str(threads),
            "-b", "%s:%d" % (HOST, port), "--chdir", app_dir, "--log-level", "warning", module]


def uwsgi_argv(venv, app_dir, port, module, threads):
    return [os.path.join(venv, "bin", "uwsgi"), "--http-socket", "%s:%d" % (HOST, port),
            "--add-header", "Connection: close", "--master", "--processes", "1",
            "--threads", str(threads), "--home", venv, "--chdir", app_dir, "--module", module,
            "--disable-logging", "--die-on-term", "--need-app", "--listen", "1024"]


def make_server(kind, tbin, venv, app_dir, module, threads, log, admin=False, extra=()):
    """kind: turnstile | turnstile-off | granian | gunicorn | uwsgi.
    Returns (Srv, port, admin_port)."""
    port = R.free_port()
    admin_port = R.free_port() if admin and kind.startswith("turnstile") else None
    env = {}
    if kind.startswith("turnstile"):
        argv = turnstile_argv(tbin, venv, app_dir, port, module, threads, admin_port, extra)
        if kind == "turnstile-off":
            env["TURNSTILE_POOL_TURN"] = "0"
    elif kind == "granian":
        argv = granian_argv(venv, app_dir, port, module, threads)
    elif kind == "gunicorn":
        argv = gunicorn_argv(venv, app_dir, port, module, threads)
    elif kind == "uwsgi":
        argv = uwsgi_argv(venv, app_dir, port, module, threads)
    else:
        raise ValueError(kind)
    return Srv(kind, argv, venv, app_dir, log, env), port, admin_port


# ---------------------------------------------------------------- metrics

_LINE = re.compile(r'^(\w+)(?:\{([^}]*)\})?\s+(\S+)$')


def scrape(admin_port):
    with urllib.request.urlopen("http://%s:%d/metrics" % (HOST, admin_port), timeout=5) as r:
        return r.read().decode()


def hist(text, name):
    """{le: count} summed over every label set but le (workers), plus total count."""
    b = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m or m.group(1) != name + "_bucket":
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        le = float(labels["le"])  # "+Inf" parses as inf
        b[le] = b.get(le, 0) + float(m.group(3))
    return b


def counter(text, name):
    tot = 0.0
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) == name:
            tot += float(m.group(3))
    return tot


def hist_delta(b0, b1):
    return {le: b1.get(le, 0) - b0.get(le, 0) for le in b1}


def hist_quantile(b, q):
    """Prometheus histogram_quantile: linear inside the bucket.
    Returns (interpolated, bucket_lower, bucket_upper, n)."""
    les = sorted(b)
    if not les:
        return float("nan"), float("nan"), float("nan"), 0
    n = b[les[-1]]
    if n <= 0:
        return float("nan"), float("nan"), float("nan"), 0
    rank = q * n
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = b[le]
        if c >= rank:
            if math.isinf(le):
                return prev_le, prev_le, le, n
            v = prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 1.0)
            return v, prev_le, le, n
        prev_le, prev_c = le, c
    return les[-1], les[-1], les[-1], n


def share_le(b, x):
    """Share of observations <= x (interpolated inside x's bucket)."""
    les = sorted(b)
    n = b[les[-1]] if les else 0
    if n <= 0:
        return float("nan")
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        if le >= x:
            c = b[le]
            if math.isinf(le):
                return prev_c / n
            return (prev_c + (c - prev_c) * (x - prev_le) / (le - prev_le)) / n
        prev_le, prev_c = le, b[le]
    return 1.0


# ---------------------------------------------------------------- clients

def wrk(conns, duration, url, timeout="5s"):
    cmd = ["taskset", "-c", str(CLIENT_CORE), "wrk", "-t1", "-c", str(conns), "-d", "%ds" % duration,
           "--timeout", timeout, "--latency", url]
    p = subprocess.run(cmd, capture_output=True, timeout=duration + 60)
    return cmd, R.parse_wrk(p.stdout.decode(errors="replace"))


class _A:
    vegeta = VEGETA


def vegeta(rate, duration, url, out, max_conns=None, timeout="10s", method="GET"):
    targets = out + ".targets"
    with open(targets, "w") as f:
        f.write("%s %s\n" % (method, url))
    cmd = ["taskset", "-c", str(CLIENT_CORE), VEGETA, "attack", "-rate", "%d/1s" % rate,
           "-duration", "%ds" % duration, "-timeout", timeout, "-max-body", "0",
           "-targets", targets, "-output", out]
    if max_conns:
        cmd[5:5] = ["-connections", str(max_conns), "-max-connections", str(max_conns)]
    p = subprocess.run(cmd, capture_output=True, timeout=duration + 60)
    if p.returncode != 0:
        return cmd, dict(error=p.stderr.decode()[-300:])
    r = R.parse_vegeta(_A, out)
    os.unlink(out)
    os.unlink(targets)
    return cmd, r


# ---------------------------------------------------------------- noise

class Mark:
    """CPU of the server tree, of the whole machine, and of this driver's tree."""

    def __init__(self, server_pid):
        self.m = R.CPUMark(server_pid)


def usage(m0, m1):
    a, b = m0.m, m1.m
    wall = b.t - a.t
    others = ((b.total - a.total) - (b.driver - a.driver)) / R.CLK_TCK
    srv = (b.server - a.server) / R.CLK_TCK if None not in (a.server, b.server) else float("nan")
    return dict(server_cpu_s=srv, others_cpu_s=others,
                others_cores=others / wall if wall > 0 else float("nan"),
                server_core_busy=R.core_busy(a.cores, b.cores, SERVER_CORE),
                client_core_busy=R.core_busy(a.cores, b.cores, CLIENT_CORE))


def quiet(threshold=0.25, max_wait=5):
    return R.wait_quiet((SERVER_CORE, CLIENT_CORE), threshold, max_wait)


# ---------------------------------------------------------------- meta

def versions(venv, tinfo):
    py = os.path.join(venv, "bin", "python")
    freeze = R.sh([py, "-m", "pip", "freeze", "--disable-pip-version-check"]).splitlines()
    keep = ("granian", "gunicorn", "uwsgi", "django", "uvicorn", "uvloop", "hypercorn", "daphne", "djust", "aioquic")
    return [
        "python (venv): %s" % R.sh([py, "-VV"]),
        "packages: " + ", ".join(l for l in freeze if l.split("==")[0].lower() in keep),
        "turnstile: %s" % tinfo,
        "wrk: %s" % R.sh(["wrk", "--version"]).splitlines()[0],
        "vegeta: %s" % R.sh([VEGETA, "-version"]).replace("\n", " "),
        "go: %s" % R.sh(["go", "version"]),
    ]


def write_meta(path, what, commands, extra_lines, venv, tinfo, load_before, started, summary):
    lines = [
        "scenario: %s" % what,
        "driver: %s" % shlex.join([sys.executable] + sys.argv),
        "started: %s   finished: %s" % (started, R.utcnow()),
        "repo: %s" % R.sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
        "",
        "## machine",
        "nproc: %s, model: %s" % (os.cpu_count(), R.cpu_model()),
        "kernel: %s" % " ".join(os.uname()),
        "pinning: server taskset -c %d, load generator taskset -c %d" % (SERVER_CORE, CLIENT_CORE),
        "loadavg before: %s" % load_before,
        "loadavg after:  %s" % R.loadavg(),
        "",
        "## versions",
    ] + versions(venv, tinfo) + ["", "## method"] + list(extra_lines) + [
        "", "## exact command lines (PORT/ADMIN = free ports chosen per run)"] + [
        "%s: %s" % kv for kv in commands.items()] + ["", "## summary", summary]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def portless(cmd, *ports):
    s = cmd if isinstance(cmd, str) else shlex.join(cmd)
    for p, name in ports:
        if p:
            s = s.replace(str(p), name)
    return s


# ---------------------------------------------------------------- A/B pairs

def snapshot_pair(a, b):
    """Snapshots of binaries A and B (snapshot_turnstile), named apart."""
    bins = {}
    for name, src in (("A", a), ("B", b)):
        bins[name], info = snapshot_turnstile(src)
        os.rename(bins[name], bins[name] + name)
        bins[name] += name
        bins[name + "_info"] = info
    return bins


def run_pairs(pairs, conns, duration, start):
    """Interleaved A/B runs (order alternated), a fresh server per run.
    start(name) starts server A or B and returns (Srv, url), the server
    ready. Returns the printed lines, {name: [(rps, cpu_us, others)]} and
    the summary lines (medians, per-pair CPU ratio B/A)."""
    lines, res = [], {"A": [], "B": []}
    for pair in range(1, pairs + 1):
        for name in (("A", "B") if pair % 2 else ("B", "A")):
            quiet(max_wait=10)
            srv, url = start(name)
            try:
                wrk(conns, 1, url)
                k0 = Mark(srv.proc.pid)
                _, r = wrk(conns, duration, url)
                k1 = Mark(srv.proc.pid)
            finally:
                srv.stop()
            u = usage(k0, k1)
            cpu = u["server_cpu_s"] / r["requests"] * 1e6
            res[name].append((r["rps"], cpu, u["others_cores"]))
            line = "pair %d %s %8.0f req/s %7.2f cpu-µs/req others %.2f" % (pair, name, r["rps"], cpu, u["others_cores"])
            lines.append(line)
            print(line, flush=True)
    summary = ["%s: median %.0f req/s, %.2f cpu-µs/req" % (
        n, statistics.median(x[0] for x in res[n]), statistics.median(x[1] for x in res[n])) for n in ("A", "B")]
    ratios = [b[1] / a[1] for a, b in zip(res["A"], res["B"])]
    summary.append("per-pair CPU ratio B/A: %s (median %.3f)" % (", ".join("%.3f" % v for v in ratios),
                                                                  statistics.median(ratios)))
    return lines, res, summary


def write_pair_meta(base, what, server_cmd, a, bins, a_extra, b_extra, load_before, started, text):
    """The record of a run_pairs run (base.meta.txt), then the snapshots
    removed. a: the driver's arguments (conns, duration, pairs, venv)."""
    write_meta(base + ".meta.txt", what,
               {"server": server_cmd,
                "wrk": "taskset -c 0 wrk -t1 -c %d -d %ds --timeout 5s --latency URL" % (a.conns, a.duration)},
               ["A: " + bins["A_info"] + a_extra, "B: " + bins["B_info"] + b_extra,
                "%d pairs, order alternated, 1 s warm-up discarded, fresh server per run" % a.pairs],
               a.venv, "A and B above", load_before, started, text)
    for name in ("A", "B"):
        os.unlink(bins[name])
    print("\nwrote %s.meta.txt" % base)
