"""ASGI HTTP connection scope echo (tests/asgi_test.go, TestASGI_Scope).

Lifespan startup puts {"answer": 42, "shared": []} in scope["state"].

/pid        the worker's pid
/state/set  sets scope["state"]["added"] = True and appends to the shared
            list, then reports the state it sees
/state      reports the state it sees (without changing it)
/shared     reports the number of items in the state's shared list
anything else: the scope as JSON: for each key, its type name, its repr()
            and a JSON rendering (bytes as latin-1 text), plus the types
            of each header pair
"""

import json
import os


def jsonable(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("latin-1")
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)


async def lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope["state"]["answer"] = 42
            scope["state"]["shared"] = []
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def respond(send, body, content_type=b"application/json"):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    assert scope["type"] == "http"
    path = scope["path"]
    if path == "/pid":
        return await respond(send, str(os.getpid()).encode(), b"text/plain")
    state = scope.get("state")
    if path == "/state/set":
        state["added"] = True
        state["shared"].append(1)
        return await respond(send, json.dumps(sorted(state)).encode())
    if path == "/state":
        return await respond(send, json.dumps(sorted(state) if state is not None else None).encode())
    if path == "/shared":
        return await respond(send, str(len(state["shared"])).encode(), b"text/plain")

    out = {}
    for key, value in scope.items():
        out[key] = {"type": type(value).__name__, "repr": repr(value), "json": jsonable(value)}
    out["_header_types"] = sorted({"%s(%s,%s)" % (type(h).__name__, type(h[0]).__name__, type(h[1]).__name__)
                                   for h in scope.get("headers", ())})
    await respond(send, json.dumps(out, ensure_ascii=False).encode("utf-8"))
