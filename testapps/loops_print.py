"""Output of several loop threads at once (--loops, issue 22):
tests/loops_test.go's TestLoops_PrintLinesWhole. GET /print?TAG prints
3000 lines "TAG i" to sys.stderr, each with print (which writes the text
and its newline as two writes), while the other loops print theirs.
GET /print?tail writes "unfinished TAIL" with no newline: it is written
as a record when the worker stops."""

import sys


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            await send({"type": m["type"] + ".complete"})
            if m["type"] == "lifespan.shutdown":
                return
    tag = scope["query_string"].decode()
    if tag == "tail":
        sys.stderr.write("unfinished TAIL")
    for i in range(3000 if tag != "tail" else 0):
        print("%s %d" % (tag, i), file=sys.stderr)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"printed"})
