"""Invalid ASGI messages and failing apps (tests/asgi_test.go,
TestASGI_BadInput).

/catch/KIND   sends the invalid message KIND inside try/except, then a
              valid response: 200 "caught <ExceptionClass>" (or "caught
              nothing" when send() accepted it)
/raise/KIND   sends the invalid message KIND and lets the exception escape
/nothing      returns without sending anything
/partial      start + "first block;" (more_body), then raises
/ok           200 "ok"

KIND is one of the keys of BAD. Each entry is (messages sent first, the
invalid message).
"""

START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}

BAD = {
    "wrong-type": ([], {"type": "http.response.begin", "status": 200, "headers": []}),
    "missing-type": ([], {"status": 200, "headers": []}),
    "missing-status": ([], {"type": "http.response.start", "headers": []}),
    "str-status": ([], {"type": "http.response.start", "status": "200", "headers": []}),
    "str-header-name": ([], {"type": "http.response.start", "status": 200, "headers": [("x-a", b"1")]}),
    "str-header-value": ([], {"type": "http.response.start", "status": 200, "headers": [(b"x-a", "1")]}),
    "body-before-start": ([], {"type": "http.response.body", "body": b"x"}),
    "str-body": ([START], {"type": "http.response.body", "body": "a str body"}),
    "str-body-more": ([START], {"type": "http.response.body", "body": "a str body", "more_body": True}),
    "start-twice": ([START], dict(START)),
    # RFC 9110 §15: a status code is 100-599, and an app sends final ones
    "status-600": ([], dict(START, status=600)),
    "status-999": ([], dict(START, status=999)),
    "status-42": ([], dict(START, status=42)),
    "status-100": ([], dict(START, status=100)),
}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    parts = scope["path"].strip("/").split("/")
    if parts[0] == "ok":
        await send(START)
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if parts[0] == "nothing":
        return
    if parts[0] == "partial":
        await send(START)
        await send({"type": "http.response.body", "body": b"first block;", "more_body": True})
        raise RuntimeError("asgi_bad: raised after the first block")
    before, bad = BAD[parts[1]]
    started = False
    for m in before:
        await send(m)
        started = started or m["type"] == "http.response.start"
    if parts[0] == "raise":
        await send(bad)
        return
    try:
        await send(bad)
    except Exception as exc:
        caught = type(exc).__name__
    else:
        caught = "nothing"
    if not started:
        await send(START)
    await send({"type": "http.response.body", "body": ("caught " + caught).encode()})
