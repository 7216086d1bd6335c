"""A FastAPI app with WebSocket routes (tests/websocket_test.go).

/ws/echo    accept (with the first subprotocol offered), echo text as
            "echo: <text>" and bytes reversed; a disconnect is recorded.
/ws/json    receive_json / send_json round trip.
/ws/room    a tiny broadcast room: every text message goes to every member.
GET /events the disconnect codes seen.
"""

from fastapi import FastAPI, WebSocket, WebSocketDisconnect

app = FastAPI()
events = []
room = set()


@app.get("/events")
async def get_events():
    return {"disconnects": events}


@app.websocket("/ws/echo")
async def echo(ws: WebSocket):
    protos = ws.scope.get("subprotocols") or []
    await ws.accept(subprotocol=protos[0] if protos else None)
    try:
        while True:
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(msg.get("code", 1000), msg.get("reason"))
            if msg.get("text") is not None:
                await ws.send_text("echo: " + msg["text"])
            else:
                await ws.send_bytes(msg["bytes"][::-1])
    except WebSocketDisconnect as exc:
        events.append(exc.code)


@app.websocket("/ws/json")
async def json_route(ws: WebSocket):
    await ws.accept()
    data = await ws.receive_json()
    await ws.send_json({"got": data, "path": ws.url.path})
    await ws.close(code=4000, reason="done")


@app.websocket("/ws/room")
async def room_route(ws: WebSocket):
    await ws.accept()
    room.add(ws)
    try:
        while True:
            text = await ws.receive_text()
            for member in list(room):
                await member.send_text(text)
    except WebSocketDisconnect:
        pass
    finally:
        room.discard(ws)
