"""A Flask app for the end-to-end tests (tests/frameworks_test.go)."""

import time

from flask import Flask, Response, jsonify, request, send_file, stream_with_context

app = Flask(__name__)


@app.get("/json")
def json_route():
    return jsonify(framework="flask", numbers=[1, 2, 3], text="h\u00e9llo \u2603", echo=request.args.get("q", ""))


def _chunks(n, gap, last_gap):
    """n chunks "chunk-i\\n", gap seconds apart, last_gap before the last."""
    for i in range(n):
        if i == n - 1:
            time.sleep(last_gap)
        elif i > 0:
            time.sleep(gap)
        yield f"chunk-{i}\n"


@app.get("/stream")
def stream():
    """A plain generator: ?n chunks, ?gap seconds apart, ?last seconds before the last."""
    n = int(request.args.get("n", 5))
    gap = float(request.args.get("gap", 0.05))
    last = float(request.args.get("last", 1.0))
    return Response(_chunks(n, gap, last), mimetype="text/plain")


@app.get("/stream-ctx")
def stream_ctx():
    """The same through stream_with_context: the generator reads request.args."""

    @stream_with_context
    def gen():
        yield from _chunks(int(request.args.get("n", 5)), float(request.args.get("gap", 0.05)),
                           float(request.args.get("last", 1.0)))

    return Response(gen(), mimetype="text/plain")


@app.route("/file", methods=["GET", "HEAD"])
def file():
    """send_file of the absolute ?path= (a file the test wrote; test app only)."""
    return send_file(request.args["path"], mimetype="application/octet-stream")
