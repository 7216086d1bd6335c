"""FastAPI JSON route: a path parameter, a query parameter and a pydantic
response model (the shape of a typical API endpoint)."""

from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI()


class Item(BaseModel):
    id: int
    name: str
    tags: list[str]
    ok: bool


@app.get("/items/{item_id}", response_model=Item)
async def item(item_id: int, q: str = "hello"):
    return Item(id=item_id, name=q, tags=["a", "b", "c"], ok=True)
