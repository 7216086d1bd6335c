"""permessage-deflate offers from the websockets client (PyPI), run by
tests/websocket_rfc_test.go with the test virtualenv's python. Prints one
JSON object: for each offer, the response's Sec-WebSocket-Extensions (null
for none), whether a message came back intact, and the error if any.

    python ws_client_deflate.py ws://127.0.0.1:PORT/echo
"""

import asyncio
import json
import sys

import websockets
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory


async def attempt(url, extensions):
    out = {"extensions": None, "echo": False, "error": ""}
    try:
        kw = {"extensions": extensions} if extensions is not None else {}
        async with websockets.connect(url, **kw) as ws:
            out["extensions"] = ws.response.headers.get("Sec-WebSocket-Extensions")
            msg = "deflate me " * 100
            await ws.send(msg)
            out["echo"] = await asyncio.wait_for(ws.recv(), 5) == msg
    except Exception as exc:  # noqa: B902 - reported to the test
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    return out


async def main(url):
    print(json.dumps({
        "server_max_window_bits=10": await attempt(url, [ClientPerMessageDeflateFactory(server_max_window_bits=10)]),
        "server_max_window_bits=15": await attempt(url, [ClientPerMessageDeflateFactory(server_max_window_bits=15)]),
        "default": await attempt(url, None),
    }))


asyncio.run(main(sys.argv[1]))
