"""B09: lifespan.startup.failed must make the server exit non-zero
(uvicorn#1066). The app as the case states it (docs/cases.md)."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.failed", "message": "backing store unreachable"})
        return
