"""A FastAPI app (tests/asgi_frameworks_test.go, TestFastAPI_*).

GET  /                      {"hello": "world"}
GET  /items/{item_id}?q=&limit=   path and query parameters (int item_id,
                            int limit 1..100): a bad one is a 422
POST /items                 a pydantic model in, the same with a total out
GET  /stream?n=&gap_ms=     a StreamingResponse of n chunks "chunk i\\n",
                            gap_ms apart
GET  /thread?ms=            awaits asyncio.to_thread(f); f sleeps ms and
                            reports its thread's name
"""

import asyncio
import threading
import time

from fastapi import FastAPI, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

app = FastAPI()


class Item(BaseModel):
    name: str = Field(min_length=1)
    price: float = Field(gt=0)
    quantity: int = 1
    tags: list[str] = []


@app.get("/")
async def root():
    return {"hello": "world"}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: str | None = None, limit: int = Query(10, ge=1, le=100)):
    return {"item_id": item_id, "q": q, "limit": limit}


@app.post("/items", status_code=201)
async def create_item(item: Item):
    return {"item": item.model_dump(), "total": round(item.price * item.quantity, 2)}


@app.get("/stream")
async def stream(n: int = 5, gap_ms: int = 100):
    async def chunks():
        for i in range(n):
            if i:
                await asyncio.sleep(gap_ms / 1000)
            yield f"chunk {i}\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


def blocking(ms):
    time.sleep(ms / 1000)
    return threading.current_thread().name


@app.get("/thread")
async def thread(ms: int = 0):
    name = await asyncio.to_thread(blocking, ms)
    return {"thread": name, "loop_thread": threading.current_thread().name}
