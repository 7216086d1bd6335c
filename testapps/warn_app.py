"""Warnings, stderr and text the log cannot take as it is
(tests/errors_test.go, TestErrors_WarningLevel, TestErrors_Surrogates).

/warn              warnings.warn(UserWarning): one WARNING record
/stderr            a line printed to sys.stderr: an ERROR record, as before
/warn-redirect     a warning under contextlib.redirect_stderr: the body is
                   what the buffer got; nothing logged
/surrogate/warn    a warning whose text holds a lone surrogate (\\udcff)
/surrogate/stderr  the same printed to sys.stderr
/surrogate/log     the same through logging (a surrogateescape'd name)
/surrogate/raise   an exception whose message holds one: a 500
/stdout-bytes      bytes written to sys.stdout.buffer (click.echo(b"..."))
/log-bigint        a logging record at level 2**40
"""

import contextlib
import io
import logging
import sys
import warnings


def app(environ, start_response):
    path = environ["PATH_INFO"]
    body = b"ok"
    if path == "/warn":
        warnings.warn("turnstile-warn-7c1 from the app", UserWarning)
    elif path == "/stderr":
        print("turnstile-stderr-7c1 from the app", file=sys.stderr)
    elif path == "/warn-redirect":
        buf = io.StringIO()
        with contextlib.redirect_stderr(buf):
            warnings.warn("turnstile-redirect-7c1", UserWarning)
        body = buf.getvalue().encode()
    elif path == "/surrogate/warn":
        warnings.warn("turnstile-sur-warn \udcff", UserWarning)
    elif path == "/surrogate/stderr":
        print("turnstile-sur-stderr \udcff", file=sys.stderr)
    elif path == "/surrogate/log":
        name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
        logging.getLogger("warn_app").error("turnstile-sur-log %s", name)
    elif path == "/stdout-bytes":
        sys.stdout.buffer.write(b"turnstile-bytes-7c1 caf\xc3")
        sys.stdout.buffer.write(b"\xa9 \xff\n")
    elif path == "/log-bigint":
        logging.getLogger("warn_app").log(2**40, "turnstile-bigint-7c1")
    elif path == "/surrogate/raise":
        raise ValueError("turnstile-sur-raise \udcff")
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
