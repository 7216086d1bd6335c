"""Logging with exc_info (tests/logs_review_test.go): a Flask view that
raises (Flask's 500 handler logs it with app.logger.exception) and one
that logs a caught exception through logging.getLogger("myapp.views")."""

import logging

from flask import Flask

app = Flask(__name__)


@app.get("/boom")
def boom():
    raise RuntimeError("flask-view-boom")


@app.get("/logexc")
def logexc():
    try:
        {}["missing-key"]
    except KeyError:
        logging.getLogger("myapp.views").exception("frobbing failed for %s", "user-7")
    return "logged"
