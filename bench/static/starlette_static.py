"""uvicorn + Starlette StaticFiles for bench/static: /static from $STATIC_DIR."""

import os

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

app = Starlette(routes=[Mount("/static", app=StaticFiles(directory=os.environ["STATIC_DIR"]))])
