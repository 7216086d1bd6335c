#!/usr/bin/env python3
"""Two turnstile binaries A and B serving the same static file, in
interleaved pairs (order alternated), for a before/after of a change in
internal/static: req/s and server CPU µs per request (/proc), wrk -t1 -c64
under taskset -c 0, the server under taskset -c 1, a fresh server per run.
Writes bench/results/static-pair-<stamp>.meta.txt (rows and summary).

    python3 bench/static/pair.py --a OLD_BIN --b bin/turnstile --file 1k --pairs 5
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import turnlib as T  # noqa: E402
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("static_run", os.path.join(os.path.dirname(__file__), "run.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True, help="turnstile binary A (before)")
    p.add_argument("--b", required=True, help="turnstile binary B (after)")
    p.add_argument("--file", default="1k", choices=sorted(S.FILES))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--venv", default=T.default_venv())
    p.add_argument("--out", default=os.path.join(T.WORK, "results"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    static_dir = S.make_files(os.path.join(T.WORK, "static-files"))
    bins = T.snapshot_pair(a.a, a.b)
    st = T.stamp()
    load_before, started = T.R.loadavg(), T.R.utcnow()

    def start(name):
        port = T.R.free_port()
        argv, env, cwd = S.server_argv("turnstile", bins[name], a.venv, port, static_dir, None)
        srv = T.Srv(name, argv, a.venv, cwd, os.path.join(T.WORK, "logs", "static-pair-%s.log" % st), env)
        url = "http://%s:%d/static/%s.bin" % (T.HOST, port, a.file)
        err = S.check(url, S.FILES[a.file])
        if err:
            srv.stop()
            sys.exit("%s: %s" % (name, err))
        return srv, url

    lines, _, summary = T.run_pairs(a.pairs, a.conns, a.duration, start)
    text = "\n".join(lines + [""] + summary)
    print("\n" + "\n".join(summary))
    base = os.path.join(a.out, "static-pair-%s" % st)
    T.write_pair_meta(base, "static-pair — two turnstile binaries, GET /static/%s.bin" % a.file,
                      "taskset -c 1 BIN --venv VENV --app-dir bench/apps --host 127.0.0.1 --port PORT "
                      "--admin-bind off --log-level warning --static /static=DIR hello:app",
                      a, bins, "", "", load_before, started, text)


if __name__ == "__main__":
    main()
