"""B09: lifespan.startup.failed with several workers must exit non-zero,
with no respawn loop (ASGI lifespan spec, "Startup Failed")."""


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.failed", "message": "backing store unreachable"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"should not serve"})
