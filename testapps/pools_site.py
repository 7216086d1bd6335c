"""A Django + Channels site for the sync-work pool tests
(tests/asgi_pools_test.go): sync views using the ORM on SQLite, and a sync
Channels WebsocketConsumer joining a group on InMemoryChannelLayer. Every
reply names the OS thread that ran the sync code (its comm: ts-http-N,
ts-sess-N under turnstile's pools) and its Django DB connection.

POOLS_DB: the SQLite file (default: a temporary one).
"""
import json
import os
import tempfile
import threading
import time

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="pools-test",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.environ.get("POOLS_DB") or os.path.join(tempfile.mkdtemp(), "pools.sqlite3"),
                           "CONN_MAX_AGE": None, "OPTIONS": {"timeout": 30}}},
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
    MIDDLEWARE=[],
)
django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from channels.generic.websocket import WebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.db import connection  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


def comm():
    """The OS name of the calling thread (top -H shows it)."""
    try:
        with open("/proc/self/task/%d/comm" % threading.get_native_id()) as f:
            return f.read().strip()
    except OSError:
        return "?"


def where():
    return {"tid": threading.get_ident(), "comm": comm()}


def orm_view(request):
    with connection.cursor() as c:
        c.execute("CREATE TABLE IF NOT EXISTS hits (id INTEGER PRIMARY KEY, at REAL)")
        c.execute("INSERT INTO hits (at) VALUES (%s)", [time.time()])
        c.execute("SELECT COUNT(*) FROM hits")
        (n,) = c.fetchone()
    if request.GET.get("sleep"):
        time.sleep(float(request.GET["sleep"]))
    return JsonResponse(dict(where(), conn=id(connection.connection), hits=n))


def sleep_view(request):
    time.sleep(float(request.GET.get("s", "1")))
    return JsonResponse(dict(where(), pid=os.getpid()))


def raise_view(request):
    raise ValueError("boom from a sync view")


urlpatterns = [path("orm/", orm_view), path("sleep/", sleep_view), path("raise/", raise_view)]


class Room(WebsocketConsumer):
    """Each message: {"n": seq, "sleep": s?, "raise": bool?, "broadcast": bool?}.
    Replies {"kind": "echo", "n", "tid", "comm"}; a broadcast reaches every
    member as {"kind": "bcast", "n", "from", "tid", "comm"}."""

    def connect(self):
        async_to_sync(self.channel_layer.group_add)("room", self.channel_name)
        self.accept()
        self.send(json.dumps(dict(where(), kind="hello")))

    def receive(self, text_data=None, bytes_data=None):
        m = json.loads(text_data)
        if m.get("raise"):
            raise ValueError("boom from a sync handler")
        if m.get("sleep"):
            time.sleep(m["sleep"])
        self.send(json.dumps(dict(where(), kind="echo", n=m["n"])))
        if m.get("broadcast"):
            async_to_sync(self.channel_layer.group_send)("room", {"type": "room.msg", "n": m["n"], "from": m.get("from")})

    def room_msg(self, event):
        self.send(json.dumps(dict(where(), kind="bcast", n=event["n"], **{"from": event["from"]})))

    def disconnect(self, code):
        async_to_sync(self.channel_layer.group_discard)("room", self.channel_name)


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([path("ws/room/", Room.as_asgi())]),
})
