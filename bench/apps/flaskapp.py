"""Flask hello: one route returning a short text body."""

from flask import Flask

app = Flask(__name__)


@app.get("/")
def hello():
    return "Hello, World!", 200, {"Content-Type": "text/plain"}
