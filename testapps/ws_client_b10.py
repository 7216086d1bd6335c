"""B10 with the websockets client from PyPI: run by tests/websocket_test.go
with the test virtualenv's python. Prints one JSON object.

    python ws_client_b10.py ws://127.0.0.1:PORT
"""

import asyncio
import json
import sys

import websockets


async def main(base):
    out = {}
    # 1. The app closes with 1008 "policy violated".
    async with websockets.connect(base + "/b10/close") as ws:
        try:
            await ws.recv()
            out["close"] = "no close"
        except websockets.ConnectionClosed as exc:
            out["close"] = {"code": exc.rcvd.code if exc.rcvd else None,
                            "reason": exc.rcvd.reason if exc.rcvd else None}
    # 2. The client closes with 4001 "bye"; the app records what it got.
    async with websockets.connect(base + "/b10/record") as ws:
        await ws.close(4001, "bye")
        out["client_close_echo"] = ws.close_code
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
