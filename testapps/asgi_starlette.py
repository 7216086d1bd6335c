"""A Starlette app (tests/asgi_frameworks_test.go, TestStarlette_*).

/static/...         StaticFiles over $ASGI_STATIC_DIR (made by the test)
GET /bg?TOKEN       answers "queued" at once; a BackgroundTask (async)
                    sleeps 0.5 s after the response and records TOKEN
GET /bg-sync?TOKEN  the same with a sync background function (run in
                    Starlette's thread pool)
GET /bg-status?TOKEN  "done" once the task for TOKEN ran, else "pending"
"""

import asyncio
import os
import time

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

done = {}


async def record(token):
    await asyncio.sleep(0.5)
    done[token] = time.time()


def record_sync(token):
    time.sleep(0.5)
    done[token] = time.time()


async def bg(request):
    token = request.url.query
    return PlainTextResponse("queued", background=BackgroundTask(record, token))


async def bg_sync(request):
    token = request.url.query
    return PlainTextResponse("queued", background=BackgroundTask(record_sync, token))


async def bg_status(request):
    return PlainTextResponse("done" if request.url.query in done else "pending")


app = Starlette(routes=[
    Route("/bg", bg),
    Route("/bg-sync", bg_sync),
    Route("/bg-status", bg_status),
    Mount("/static", StaticFiles(directory=os.environ["ASGI_STATIC_DIR"]), name="static"),
])
