"""bench/cluster/common.py: what parts.py and run.py share.

The machine's busy CPU from /proc/stat; examples/cluster/haproxy.cfg with
a run's addresses substituted; HAProxy brought up and read through its
runtime API (its socket); redis-server started and asked through
redis-cli; the signals that end a run; the results' .csv, .md and the
head and tail of the .meta.txt. Python 3 stdlib only.
"""

import csv
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
import turnlib as T  # noqa: E402

R = T.R
ROOT = T.ROOT
EXAMPLE = os.path.join(ROOT, "examples", "cluster")


# ---------------------------------------------------------------- /proc

def machine_busy():
    """Busy ticks of every core together (/proc/stat "cpu": all but idle
    and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4]


# ---------------------------------------------------------------- HAProxy

def haproxy_cfg(subs, script):
    """examples/cluster/haproxy.cfg with each (old, new) of subs replaced
    in turn; SystemExit naming script (to update) when an old text is no
    longer in it."""
    cfg = open(os.path.join(EXAMPLE, "haproxy.cfg")).read()
    for old, new in subs:
        if old not in cfg:
            raise SystemExit("examples/cluster/haproxy.cfg has no %r any more: update %s" % (old, script))
        cfg = cfg.replace(old, new)
    return cfg


def haproxy_api(sock, cmd, timeout):
    """One command to HAProxy's runtime API on the Unix socket sock: its
    answer, None if it does not answer within timeout seconds."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(sock)
            s.sendall((cmd + "\n").encode())
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()
    except OSError:
        return None


def haproxy_stat(sock, timeout):
    """{server: {column: value}} of the servers of backend "turnstile"
    (show stat); {} when HAProxy does not answer."""
    lines = (haproxy_api(sock, "show stat", timeout) or "").splitlines()
    if not lines:
        return {}
    cols = lines[0].lstrip("# ").split(",")
    rows = {}
    for line in lines[1:]:
        f = line.split(",")
        if len(f) >= len(cols) and f[0] == "turnstile" and f[1] not in ("BACKEND", "FRONTEND"):
            rows[f[1]] = dict(zip(cols, f))
    return rows


def haproxy_ready(proc, sock, n_up, timeout, log_name):
    """Waits for HAProxy (proc) to answer on sock (10 s), sets servers
    h(n_up+1)..h3 MAINT (no traffic, no checks) and waits until h1..h(n_up)
    are UP and the others MAINT (20 s); RuntimeError otherwise. timeout:
    each API call's."""
    deadline = time.time() + 10
    while haproxy_api(sock, "show info", timeout) is None:
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError("haproxy did not start (%s)" % log_name)
        time.sleep(0.1)
    for i in range(n_up + 1, 4):
        out = haproxy_api(sock, "set server turnstile/h%d state maint" % i, timeout)
        if out is None or out.strip():
            raise RuntimeError("set server h%d state maint: %r" % (i, out))
    want = {"h%d" % i: ("UP" if i <= n_up else "MAINT") for i in range(1, 4)}
    deadline = time.time() + 20
    while True:
        st = haproxy_stat(sock, timeout)
        if all(st.get(h, {}).get("status") == s for h, s in want.items()):
            return
        if time.time() > deadline:
            raise RuntimeError("HAProxy: servers %s, want %s" % ({h: v.get("status") for h, v in st.items()}, want))
        time.sleep(0.1)


# ---------------------------------------------------------------- Redis

def redis_cli(host, port, *args):
    """redis-cli -h host -p port args: its stdout, stripped."""
    return subprocess.run(["redis-cli", "-h", host, "-p", str(port)] + list(args), capture_output=True,
                          text=True).stdout.strip()


def start_redis(host, port, log_path, extra=()):
    """redis-server on host:port (TCP, no persistence, extra flags
    appended), in its own session, its output appended to log_path; the
    Popen once it answers PING. SystemExit when it does not within 10 s;
    it is stopped then, and on any exception while waiting."""
    with open(log_path, "ab") as log:
        p = subprocess.Popen(["redis-server", "--bind", host, "--port", str(port), "--save", "", "--appendonly", "no"]
                             + list(extra) + ["--daemonize", "no", "--loglevel", "warning"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 10
        while redis_cli(host, port, "PING") != "PONG":
            if time.time() > deadline or p.poll() is not None:
                raise SystemExit("redis-server did not start (%s)" % log_path)
            time.sleep(0.1)
    except BaseException:
        T.stop_proc(p, 10)
        raise
    return p


# ---------------------------------------------------------------- processes

def term_group(p, timeout):
    """SIGTERM to the process group p leads (start_new_session) if p
    still runs, then up to timeout s for p to exit; what still runs then
    is the caller's to kill."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


# ---------------------------------------------------------------- a run

def add_run_args(p):
    """The options every cluster bench takes (argparse parser p): --venv,
    --turnstile-bin, --out, --note."""
    p.add_argument("--venv", default=os.environ.get("BENCH_VENV") or T.default_venv())
    p.add_argument("--turnstile-bin", default=os.environ.get("TURNSTILE_BIN") or os.path.join(ROOT, "bin", "turnstile"))
    p.add_argument("--out", default=T.RESULTS)
    p.add_argument("--note", default="", help="a line for the meta (e.g. what else runs on the machine)")


def preflight(tools, who, venv):
    """SystemExit unless every one of tools is on PATH ("who needs ...")
    and venv is a virtualenv."""
    for tool in tools:
        if subprocess.run(["which", tool], capture_output=True).returncode:
            raise SystemExit("%s needs %s" % (who, tool))
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        raise SystemExit("--venv %s: no such virtualenv (bench/setup.sh makes it)" % venv)


def on_signal(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def catch_signals():
    """SIGINT (also when started with it ignored, as a background job),
    SIGTERM and SIGHUP end the run through KeyboardInterrupt: its teardown
    runs."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)


def ignore_signals():
    """From the teardown on: a second Ctrl-C cannot cut it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


# ---------------------------------------------------------------- results

def write_tables(base, keys, rows, title, md):
    """base.csv (rows, columns keys) and base.md ("# title", then md)."""
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with open(base + ".md", "w") as f:
        f.write("# %s\n\n%s" % (title, md))


def meta_head(scenario, started, interrupted, pinning, load_before):
    """The .meta.txt's first lines: scenario, driver, times, repo and the
    machine (pinning: what shares the cores)."""
    return [
        "scenario: %s" % scenario,
        "driver: %s" % shlex.join([sys.executable] + sys.argv),
        "started: %s   finished: %s%s" % (started, R.utcnow(), ("   INTERRUPTED: " + interrupted) if interrupted else ""),
        "repo: %s" % R.sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
        "", "## machine",
        "nproc: %s, model: %s" % (os.cpu_count(), R.cpu_model()),
        "kernel: %s" % " ".join(os.uname()),
        "pinning: %s" % pinning,
        "loadavg before: %s" % load_before,
        "loadavg after:  %s" % R.loadavg(),
    ]


def write_meta(base, lines, note, md):
    """base.meta.txt: lines, the note (if any) and the summary md; md and
    where the results are, printed."""
    if note:
        lines = lines + ["note: %s" % note]
    lines = lines + ["", "## summary", md]
    with open(base + ".meta.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(md)
    print("results: %s.{csv,md,meta.txt}" % base)
