"""Embedding pitfall: a write to a closed pipe or socket must raise
BrokenPipeError, never kill the process with SIGPIPE.

/thread  the write happens on a threading.Thread the app starts
/inline  the write happens on the pool thread running the request
/pid     the worker's pid
Each answers "<pipe result> <socket result> <pid>".
"""

import os
import socket
import threading


def _break():
    out = []
    r, w = os.pipe()
    os.close(r)
    try:
        os.write(w, b"x" * 1024)
        out.append("pipe:wrote")
    except BrokenPipeError:
        out.append("pipe:BrokenPipeError")
    except Exception as exc:
        out.append(f"pipe:{type(exc).__name__}")
    finally:
        os.close(w)
    a, b = socket.socketpair()
    b.close()
    try:
        a.send(b"x" * 1024)
        out.append("socket:sent")
    except BrokenPipeError:
        out.append("socket:BrokenPipeError")
    except Exception as exc:
        out.append(f"socket:{type(exc).__name__}")
    finally:
        a.close()
    return out


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/thread":
        result = []
        t = threading.Thread(target=lambda: result.extend(_break()))
        t.start()
        t.join(10)
        out = result or ["thread-did-not-finish"]
    elif path == "/inline":
        out = _break()
    else:
        out = []
    body = " ".join(out + [str(os.getpid())]).encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
