"""Responses whose framing the app gets wrong, and the app's own
Connection header (tests/asgi_test.go, TestASGI_ResponseFraming).

/start-only         start, then returns
/more-then-return   start, body "abc" with more_body, then returns
/cl-short           content-length 10, final body "abc": send() raises
/more-then-short    content-length 11, "abc" with more_body, then an empty
                    final body: send() raises after "abc" went out
/cl-long            content-length 2, body "abcdef": send() raises
/cl-long-caught     as /cl-long inside try, then body "ab": 200 "ab"
/cl-dup             content-length 2 and 3: send() raises, nothing sent
/cl-dup-same        content-length 2 twice, body "ok": 200 "ok"
/cl-parts           content-length 6, "abc" (more_body) then "def"
/cl-empty?status=N  content-length 10 and an empty body: right for HEAD,
                    204 and 304
/pathsend?cl=N      this file by http.response.pathsend, with content-length
                    N (none when N is -1)
/pathsend-after-body  start, body "x" with more_body, then a pathsend: send()
                    raises (the file must be the whole body)
/head-first         start and an empty body with more_body (the head goes
                    out alone), then echoes the request body once it came
/head-wait          start and an empty body with more_body, then waits until
                    /head-release is requested, then "released"
/conn-close         connection: close
/conn-other         connection: keep-alive
/duplex             starts a chunked response, then echoes the request
                    body as it reads it (full duplex)
/after-disconnect   waits for http.disconnect, then raises an app error
                    whose cause is an OSError of its own
/ok                 200 "ok" (does not read the request body)
"""

import asyncio


_release_event = None


def _released():
    global _release_event
    if _release_event is None:
        _release_event = asyncio.Event()
    return _release_event


def start(*headers, status=200):
    return {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain"), *headers]}


def body(b, more=False):
    return {"type": "http.response.body", "body": b, "more_body": more}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/start-only":
        await send(start())
    elif path == "/pathsend":
        cl = int(scope["query_string"].decode().partition("=")[2])
        if "http.response.pathsend" not in scope.get("extensions", {}):
            raise RuntimeError("no http.response.pathsend extension")
        await send(start(*([(b"content-length", b"%d" % cl)] if cl >= 0 else [])))
        await send({"type": "http.response.pathsend", "path": __file__})
    elif path == "/pathsend-after-body":
        await send(start())
        await send(body(b"x", True))
        await asyncio.sleep(0.05)  # the head and "x" leave first
        await send({"type": "http.response.pathsend", "path": __file__})
    elif path == "/head-wait":
        await send(start())
        await send(body(b"", True))
        await _released().wait()
        await send(body(b"released"))
    elif path == "/head-release":
        _released().set()
        await send(start())
        await send(body(b"ok"))
    elif path == "/head-first":
        await send(start())
        await send(body(b"", True))
        got = b""
        while True:
            m = await receive()
            got += m.get("body", b"")
            if not m.get("more_body"):
                break
        await send(body(got))
    elif path == "/more-then-short":
        await send(start((b"content-length", b"11")))
        await send(body(b"abc", True))
        await asyncio.sleep(0.05)  # the head and "abc" leave first
        await send(body(b""))
    elif path == "/more-then-return":
        await send(start())
        await send(body(b"abc", True))
    elif path == "/cl-short":
        await send(start((b"content-length", b"10")))
        await send(body(b"abc"))
    elif path == "/cl-long":
        await send(start((b"content-length", b"2")))
        await send(body(b"abcdef"))
    elif path == "/cl-long-caught":
        await send(start((b"content-length", b"2")))
        try:
            await send(body(b"abcdef"))
        except RuntimeError:
            pass
        await send(body(b"ab"))
    elif path == "/cl-dup":
        await send(start((b"content-length", b"2"), (b"content-length", b"3")))
        await send(body(b"ok"))
    elif path == "/cl-dup-same":
        await send(start((b"content-length", b"2"), (b"Content-Length", b"2")))
        await send(body(b"ok"))
    elif path == "/cl-parts":
        await send(start((b"content-length", b"6")))
        await send(body(b"abc", True))
        await send(body(b"def"))
    elif path == "/cl-empty":
        status = int(scope["query_string"].decode().partition("=")[2] or 200)
        await send(start((b"content-length", b"10"), status=status))
        await send(body(b""))
    elif path == "/conn-close":
        await send(start((b"connection", b"Keep-Alive, close")))
        await send(body(b"bye"))
    elif path == "/duplex":
        await send(start())
        await send(body(b"", True))
        while True:
            m = await receive()
            await send(body(m.get("body", b""), m.get("more_body", False)))
            if not m.get("more_body"):
                break
    elif path == "/after-disconnect":
        await receive()
        while (await receive())["type"] != "http.disconnect":
            pass
        raise RuntimeError("asgi_framing: config missing") from FileNotFoundError("settings.toml")
    elif path == "/conn-other":
        await send(start((b"connection", b"keep-alive")))
        await send(body(b"hi"))
    else:
        await send(start())
        await send(body(b"ok"))
