"""WebSocket apps for cases B10, B11, B14 and B29 (tests/websocket_test.go).

/b10/close      accept, then close with 1008 "policy violated" (B10).
/b10/record     accept, wait for websocket.disconnect, remember its code and
                reason: GET /last returns them (B10).
/b11            accept, then every 0.2 s send a text frame; an OSError from
                send() is recorded by class name, cleanups counted in
                finally: GET /stats (B11).
/b14/close      websocket.close before accept: the server answers 403 (B14).
/b14/deny       the denial response extension: 401, www-authenticate, body
                "no token" (B14).
/b14/raise      raise before accept: 500.
/b29/counter    accept, send a counter every second until the connection
                ends; finally writes the file named by ?marker= (B29 app 1).
/b29/stubborn   accept, then loop forever, catching every exception (B29
                app 2).
/bad/*          invalid messages: the error each send() raised is sent back
                as text where possible, else recorded in /stats.
/close-long     accept, then close with 4321 and a reason over 123 bytes in
                UTF-8: ?kind=ascii ("x" * 200), euro ("x" + "€" * 60) or
                e ("é" * 100).
/subproto/unoffered  accept with subprotocol "evil" whatever was offered
                (send() raises; the app lets it propagate).
/subproto/caught     the same, catching the error: then accept without a
                subprotocol and send "<exception class>: <message>".
/subproto/header     accept with a hand-set sec-websocket-protocol: evil
                header (Go refuses the handshake).
"""

import asyncio
import json
import os
import urllib.parse

state = {"last": None, "b11_errors": [], "b11_cleanups": 0, "bad": {}}


async def http(scope, receive, send):
    if scope["path"] == "/last":
        body = json.dumps(state["last"]).encode()
    elif scope["path"] == "/pid":
        body = str(os.getpid()).encode()
    else:
        body = json.dumps(state).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        return await http(scope, receive, send)
    path = scope["path"]
    msg = await receive()
    assert msg["type"] == "websocket.connect", msg

    if path == "/b10/close":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1008, "reason": "policy violated"})
        msg = await receive()
        assert msg["type"] == "websocket.disconnect", msg
    elif path == "/b10/record":
        await send({"type": "websocket.accept"})
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                state["last"] = {"code": msg["code"], "reason": msg.get("reason")}
                return
    elif path == "/b11":
        await send({"type": "websocket.accept"})
        try:
            n = 0
            while True:
                await asyncio.sleep(0.2)
                n += 1
                try:
                    await send({"type": "websocket.send", "text": "tick %d" % n})
                except OSError as exc:
                    state["b11_errors"].append(type(exc).__name__ + ":" + ",".join(c.__name__ for c in type(exc).__mro__))
                    msg = await receive()
                    state["b11_errors"].append(msg["type"] + ":" + str(msg.get("code")))
                    return
        finally:
            state["b11_cleanups"] += 1
    elif path == "/b14/close":
        await send({"type": "websocket.close"})
    elif path == "/b14/deny":
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"www-authenticate", b'Bearer realm="ws"'), (b"content-type", b"text/plain")]})
        await send({"type": "websocket.http.response.body", "body": b"no ", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"token"})
    elif path == "/b14/raise":
        raise RuntimeError("refused by raising")
    elif path == "/b29/counter":
        qs = urllib.parse.parse_qs(scope["query_string"].decode())
        marker = qs["marker"][0]
        await send({"type": "websocket.accept"})
        try:
            n = 0
            while True:
                n += 1
                try:
                    await send({"type": "websocket.send", "text": str(n)})
                except OSError:
                    msg = await receive()  # the websocket.disconnect that explains it
                else:
                    try:
                        msg = await asyncio.wait_for(receive(), 1.0)
                    except asyncio.TimeoutError:
                        continue
                if msg["type"] == "websocket.disconnect":
                    with open(marker + ".code", "w") as f:
                        f.write(str(msg["code"]))
                    return
        finally:
            with open(marker, "w") as f:
                f.write("cleaned up")
    elif path == "/b29/stubborn":
        await send({"type": "websocket.accept"})
        while True:
            try:
                await send({"type": "websocket.send", "text": "still here"})
                await asyncio.sleep(0.5)
            except BaseException:  # noqa: B902 - deliberately ignores even cancellation
                await asyncio.sleep(0)
    elif path.startswith("/bad/"):
        errors = []
        async def attempt(message):
            try:
                await send(message)
            except Exception as exc:  # noqa: B902
                errors.append(type(exc).__name__)
                return
            errors.append("ok")
        if path == "/bad/send-before-accept":
            await attempt({"type": "websocket.send", "text": "x"})
            await send({"type": "websocket.accept"})
        elif path == "/bad/accept-twice":
            await send({"type": "websocket.accept"})
            await attempt({"type": "websocket.accept"})
        elif path == "/bad/wrong-types":
            await send({"type": "websocket.accept"})
            await attempt({"type": "websocket.send", "text": b"bytes-as-text"})
            await attempt({"type": "websocket.send", "bytes": "text-as-bytes"})
            await attempt({"type": "websocket.send"})
            await attempt({"type": "websocket.send", "text": "both", "bytes": b"both"})
            await attempt({"type": "http.response.start", "status": 200})
            await attempt({"type": "websocket.close", "code": 99})
            await attempt({"type": "websocket.send", "text": "\ud800"})
        await send({"type": "websocket.send", "text": json.dumps(errors)})
        await send({"type": "websocket.close", "code": 1000})
    elif path == "/close-long":
        kind = scope["query_string"].decode()
        reason = {"kind=ascii": "x" * 200, "kind=euro": "x" + "€" * 60, "kind=e": "é" * 100}[kind]
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 4321, "reason": reason})
    elif path == "/subproto/unoffered":
        await send({"type": "websocket.accept", "subprotocol": "evil"})
    elif path == "/subproto/caught":
        try:
            await send({"type": "websocket.accept", "subprotocol": "evil"})
        except ValueError as exc:
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": "%s: %s" % (type(exc).__name__, exc)})
        await send({"type": "websocket.close", "code": 1000})
    elif path == "/subproto/header":
        await send({"type": "websocket.accept", "headers": [(b"sec-websocket-protocol", b"evil")]})
        msg = await receive()
        state["subproto_header"] = msg["type"]
    elif path == "/close1006":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1006, "reason": "app said 1006"})
    elif path == "/return":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "bye"})
    elif path == "/raise-after-accept":
        await send({"type": "websocket.accept"})
        raise RuntimeError("boom after accept")
    else:
        await send({"type": "websocket.close", "code": 1000})
