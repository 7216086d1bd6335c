"""Lifespan startup that blocks the loop for 1.5 s with time.sleep
(tests/watchdog_test.go, TestWatchdog_NoStallFromStartup): the watchdog
starts after startup and must not report that time as a stall."""
import time


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                time.sleep(1.5)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
