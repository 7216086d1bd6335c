"""Embedding pitfall: signal.signal and faulthandler.enable at import and in
a request must not take signals away from the server (nor raise ValueError
on a non-main thread).

/        calls signal.signal and faulthandler.enable; answers what each did
/big     a 4 MiB streamed response, for a client that resets mid-body (the
         app asked for SIGPIPE's default action at import: it must not get it)

MARKER (env EMBED_SIGNAL_MARKER) is a file the app's handlers would write
to if they ever ran.
"""

import faulthandler
import os
import signal

MARKER = os.environ.get("EMBED_SIGNAL_MARKER", "")


def _handler(signum, frame):
    if MARKER:
        with open(MARKER, "a") as f:
            f.write(f"handler ran for {signum}\n")


signal.signal(signal.SIGTERM, _handler)
signal.signal(signal.SIGINT, _handler)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
faulthandler.enable()


def _try(name, call):
    try:
        call()
        return f"{name}:ok"
    except Exception as exc:
        return f"{name}:{type(exc).__name__}"


def app(environ, start_response):
    if environ["PATH_INFO"] == "/big":
        def gen():
            for _ in range(64):
                yield b"y" * 65536

        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return gen()
    out = [_try(sig.name, lambda sig=sig: signal.signal(sig, _handler))
           for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGCHLD)]
    out.append(_try("SIGPIPE", lambda: signal.signal(signal.SIGPIPE, signal.SIG_DFL)))
    out.append(_try("faulthandler", faulthandler.enable))
    out.append(str(os.getpid()))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [" ".join(out).encode()]
