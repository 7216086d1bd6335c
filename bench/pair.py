#!/usr/bin/env python3
"""Two turnstile binaries A (before) and B (after) on one app of bench/apps,
in interleaved pairs (order alternated), for the "no cost" check of a
change: req/s and server CPU µs per request (/proc), wrk -t1 under
taskset -c 0, the server under taskset -c 1 (turnlib), a fresh server per
run. Writes bench/results/pair-<app>-<stamp>.meta.txt.

    python3 bench/pair.py --a OLD_BIN --b bin/turnstile-3.11 --app hello:app --pairs 5
    python3 bench/pair.py --a OLD_BIN --b bin/turnstile-3.11 --app asgi_hello:app --pairs 5
"""

import argparse
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import turnlib as T  # noqa: E402

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True, help="turnstile binary A (before)")
    p.add_argument("--b", required=True, help="turnstile binary B (after)")
    p.add_argument("--a-args", default="", help="extra flags for A, shell-quoted")
    p.add_argument("--b-args", default="", help="extra flags for B, shell-quoted")
    p.add_argument("--app", default="hello:app", help="MODULE:ATTR in bench/apps")
    p.add_argument("--path", default="/")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--venv", default=T.default_venv())
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bins = T.snapshot_pair(a.a, a.b)
    st = T.stamp()
    tag = a.app.split(":")[0]
    load_before, started = T.R.loadavg(), T.R.utcnow()
    log = os.path.join(T.WORK, "logs", "pair-%s-%s.log" % (tag, st))

    def start(name):
        extra = shlex.split(a.a_args if name == "A" else a.b_args)
        srv, port, _ = T.make_server("turnstile", bins[name], a.venv, APPS, a.app, a.threads, log, extra=extra)
        srv.wait_ready(port, a.path)
        return srv, "http://%s:%d%s" % (T.HOST, port, a.path)

    lines, _, summary = T.run_pairs(a.pairs, a.conns, a.duration, start)
    text = "\n".join(lines + [""] + summary)
    print("\n" + "\n".join(summary))
    base = os.path.join(a.out, "pair-%s-%s" % (tag, st))
    T.write_pair_meta(base, "pair — two turnstile binaries, %s GET %s" % (a.app, a.path),
                      "taskset -c 1 BIN --venv VENV --app-dir bench/apps --host 127.0.0.1 --port PORT "
                      "--blocking-threads %d --admin-bind off --log-level warning %s" % (a.threads, a.app),
                      a, bins, " " + a.a_args, " " + a.b_args, load_before, started, text)


if __name__ == "__main__":
    main()
