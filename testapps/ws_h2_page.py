"""ASGI app for the Chromium check of WebSockets over HTTP/2 (RFC 8441).

/       an HTML page whose script opens a WebSocket to /echo on its own
        origin and sends "hello"; it fetches /tick until the echo came and
        the server saw the message (at most 200 times), then writes the
        last answer, the echo, and the page's nextHopProtocol into
        <pre id="result"> as JSON (the fetches keep headless Chromium's
        virtual time from ending before the WebSocket has been served,
        and let its events run between them)
/tick   waits (at most 20 ms) for /echo's first message, then answers the
        http_version of the websocket scope as JSON
/echo   WebSocket: each text message back with the scope's http_version
"""

import asyncio
import json

seen = {"http_version": None}
event = None

PAGE = b"""<!doctype html>
<html><body><pre id="result">pending</pre>
<script>
const out = document.getElementById("result");
const proto = performance.getEntriesByType("navigation")[0].nextHopProtocol;
let echo = "", error = "";
const ws = new WebSocket("wss://" + location.host + "/echo");
ws.onopen = () => ws.send("hello");
ws.onmessage = (e) => { echo = e.data; };
ws.onerror = () => { error = "websocket error"; };
(async () => {
  let server = {};
  for (let i = 0; i < 200 && !(echo && server.http_version); i++) {
    server = await (await fetch("/tick")).json();
  }
  out.textContent = JSON.stringify({server: server, echo: echo, error: error, page_protocol: proto});
})();
</script></body></html>
"""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    global event
    if event is None:
        event = asyncio.Event()
    if scope["type"] == "http" and scope["path"] == "/tick":
        try:
            await asyncio.wait_for(event.wait(), 0.02)
        except asyncio.TimeoutError:
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(seen).encode()})
        return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html; charset=utf-8")]})
        await send({"type": "http.response.body", "body": PAGE})
        return
    msg = await receive()
    await send({"type": "websocket.accept"})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            return
        if msg.get("text") is not None:
            await send({"type": "websocket.send", "text": msg["text"] + " http_version=" + scope["http_version"]})
            seen["http_version"] = scope["http_version"]
            event.set()
