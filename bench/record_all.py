#!/usr/bin/env python3
"""Record the turnstile benches into bench/results/, in priority order.

Waits until the 1-minute load average is under --max-load, or until
--start-at (UTC HH:MM) whatever the load. Then runs each step only if its
estimated duration still fits before --cutoff (UTC HH:MM); a step that does
not fit is logged as skipped. Everything goes to stdout (tee it to a log).
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
PY = sys.executable
OUT = ["--out", os.path.join(BENCH, "results")]

# (name, estimated seconds, argv)
STEPS = [
    ("probe-pool-fairness", 330, [PY, "bench/probe-pool-fairness/run.py", "--reps", "3", "--duration", "5",
                                  "--rate-frac", "0.75"] + OUT),
    ("wsgi-hello", 780, [PY, "bench/run.py", "wsgi-hello", "--reps", "5", "--conns", "16,64,256", "--duration", "5",
                         "--servers", "turnstile,granian,gunicorn,uwsgi", "--noise-retries", "0", "--quiet-max-wait", "5"] + OUT),
    ("asgi-hello", 1000, [PY, "bench/run.py", "asgi-hello", "--reps", "5", "--conns", "16,64,256", "--duration", "5",
                          "--servers", "turnstile,granian,uvicorn,hypercorn,daphne", "--noise-retries", "0", "--quiet-max-wait", "5"] + OUT),
    ("asgi-hello-reduced", 520, [PY, "bench/run.py", "asgi-hello", "--reps", "5", "--conns", "64", "--duration", "5",
                                 "--servers", "turnstile,granian,uvicorn,hypercorn,daphne",
                                 "--noise-retries", "0", "--quiet-max-wait", "5"] + OUT),
    ("mixed", 300, [PY, "bench/mixed/run.py", "--duration", "8"] + OUT),
    ("b34", 170, [PY, "bench/mixed/run.py", "--name", "b34", "--app", "b34app:app", "--fast", "/io", "--slow", "/cpu",
                  "--counts", "0,2", "--rate", "50", "--duration", "20", "--threads", "8",
                  "--servers", "turnstile,turnstile-off,granian,gunicorn", "--warmup", "1"] + OUT),
    ("slowloris-echo", 40, [PY, "bench/slowloris/run.py", "--app", "echo"] + OUT),
    ("slowloris-hello", 40, [PY, "bench/slowloris/run.py", "--app", "hello"] + OUT),
    ("front", 110, [PY, "bench/front/run.py", "--pairs", "5", "--duration", "5"] + OUT),
    ("barrier-cost", 260, [PY, "bench/probe-pool-fairness/cost.py", "--pairs", "7", "--duration", "5"] + OUT),
    ("wsgi-json", 780, [PY, "bench/run.py", "wsgi-json", "--reps", "5", "--conns", "16,64,256", "--duration", "5",
                        "--noise-retries", "0", "--quiet-max-wait", "5"] + OUT),
    ("wsgi-django", 780, [PY, "bench/run.py", "wsgi-django", "--reps", "5", "--conns", "16,64,256", "--duration", "5",
                          "--noise-retries", "0", "--quiet-max-wait", "5"] + OUT),
]


def utc_today(hhmm):
    h, m = map(int, hhmm.split(":"))
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.replace(hour=h, minute=m, second=0, microsecond=0)


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-load", type=float, default=1.0)
    p.add_argument("--start-at", default="21:45")
    p.add_argument("--cutoff", default="22:12")
    p.add_argument("--only", default="", help="comma list of step names")
    a = p.parse_args()
    start_at, cutoff = utc_today(a.start_at), utc_today(a.cutoff)
    while True:
        load = float(open("/proc/loadavg").read().split()[0])
        if load < a.max_load:
            print("%s load %.2f < %.2f: starting" % (now().strftime("%H:%M:%S"), load, a.max_load), flush=True)
            break
        if now() >= start_at:
            print("%s start time %s reached at load %.2f: starting anyway" % (
                now().strftime("%H:%M:%S"), a.start_at, load), flush=True)
            break
        time.sleep(10)
    only = set(a.only.split(",")) if a.only else None
    done = set()
    for name, est, argv in STEPS:
        if only and name not in only:
            continue
        if name == "asgi-hello-reduced" and "asgi-hello" in done:
            continue
        left = (cutoff - now()).total_seconds()
        if est > left:
            print("%s SKIP %s: estimated %ds, %ds left before %s" % (
                now().strftime("%H:%M:%S"), name, est, left, a.cutoff), flush=True)
            continue
        print("%s RUN %s (est %ds, load %s): %s" % (now().strftime("%H:%M:%S"), name, est,
                                                    open("/proc/loadavg").read().split()[0],
                                                    shlex.join(argv)), flush=True)
        t0 = time.monotonic()
        rc = subprocess.run(argv, cwd=ROOT).returncode
        print("%s END %s rc=%d in %.0fs" % (now().strftime("%H:%M:%S"), name, rc, time.monotonic() - t0), flush=True)
        if rc == 0:
            done.add(name)


if __name__ == "__main__":
    main()
