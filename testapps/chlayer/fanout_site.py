"""A Channels room whose ticks go out by turnstile's fan-out
(ChannelLayer.group_send_frames: Go writes them, no consumer runs), for
tests/fanout_test.go.

/ws/tick/ROOM/   an AsyncWebsocketConsumer that joins group ROOM. Text
                 frames it reads are commands:
  "tick N"       N fan-out text frames "t0".."t<N-1>" (every 3rd one
                 padded with 200 "x", to give deflate something to do)
  "bin N"        N fan-out binary frames b"b0".."b<N-1>"
  "mixed N"      for i < N: its own send "own<i>", then a fan-out "fan<i>"
  "gtick N"      N ticks the Channels way: group_send {"type":
                 "room.tick"}, each member's room_tick sends tick_text(i)
  "chat T"       the Channels way: group_send {"type": "room.message"},
                 each member's room_message handler sends {"chat": T}
  "count"        replies {"handled": the handler calls of this process}
  "bad"          replies {"bad": [[case, exception class name]...]}
  ?hello=1       the first frame is {"hello": the worker's pid}
  ?keep=1        disconnect does not group_discard: the ended session's
                 channel stays a member (the fan-out must skip it)
/push/ROOM/?n=N  a sync view: N frames "p0".. by send_frames (the sync
                 form), then one "a0" by async_to_sync(group_send_frames)
"""
import json
import os

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="fanout-test",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": {"BACKEND": "turnstile.channels.ChannelLayer", "CONFIG": {"capacity": 1000}}},
    MIDDLEWARE=[],
    DATABASES={},
)
django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402

handled = 0  # calls of the consumers' layer-message handlers, this process


def push(request, room):
    layer = get_channel_layer()
    for i in range(int(request.GET.get("n", "1"))):
        layer.send_frames(room, text="p%d" % i)
    async_to_sync(layer.group_send_frames)(room, text="a0")
    return JsonResponse({"ok": True})


urlpatterns = [path("push/<str:room>/", push)]


def tick_text(i):
    return "t%d" % i + ("x" * 200 if i % 3 == 0 else "")


class TickRoom(AsyncWebsocketConsumer):
    async def connect(self):
        self.room = self.scope["url_route"]["kwargs"]["room"]
        await self.channel_layer.group_add(self.room, self.channel_name)
        await self.accept()
        if b"hello=1" in self.scope["query_string"]:
            await self.send(text_data=json.dumps({"hello": os.getpid()}))

    async def disconnect(self, code):
        if b"keep=1" not in self.scope["query_string"]:
            await self.channel_layer.group_discard(self.room, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        cmd, _, arg = text_data.partition(" ")
        layer = self.channel_layer
        if cmd == "tick":
            for i in range(int(arg)):
                await layer.group_send_frames(self.room, text=tick_text(i))
        elif cmd == "bin":
            for i in range(int(arg)):
                await layer.group_send_frames(self.room, bytes=b"b%d" % i)
        elif cmd == "mixed":
            for i in range(int(arg)):
                await self.send(text_data="own%d" % i)
                await layer.group_send_frames(self.room, text="fan%d" % i)
        elif cmd == "gtick":
            for i in range(int(arg)):
                await layer.group_send(self.room, {"type": "room.tick", "text": tick_text(i)})
        elif cmd == "chat":
            await layer.group_send(self.room, {"type": "room.message", "text": arg})
        elif cmd == "count":
            await self.send(text_data=json.dumps({"handled": handled}))
        elif cmd == "bad":
            await self.send(text_data=json.dumps({"bad": await self.bad_cases()}))

    async def bad_cases(self):
        layer = self.channel_layer
        cases = [
            ("both", dict(text="a", bytes=b"a")),
            ("neither", dict()),
            ("int text", dict(text=1)),
            ("bytes text", dict(text=b"a")),
            ("str bytes", dict(bytes="a")),
            ("list bytes", dict(bytes=[1])),
            ("surrogate", dict(text="\udc80")),
            ("oversize", dict(bytes=b"x" * ((1 << 20) + 1))),
        ]
        out = []
        for name, kw in cases:
            try:
                await layer.group_send_frames(self.room, **kw)
                out.append([name, "none"])
            except Exception as exc:
                out.append([name, type(exc).__name__])
        for name, group in (("bad group", "no spaces allowed"), ("int group", 5)):
            try:
                layer.send_frames(group, text="x")
                out.append([name, "none"])
            except Exception as exc:
                out.append([name, type(exc).__name__])
        return out

    async def room_tick(self, event):
        await self.send(text_data=event["text"])

    async def room_message(self, event):
        global handled
        handled += 1
        await self.send(text_data=json.dumps({"chat": event["text"]}))


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([path("ws/tick/<str:room>/", TickRoom.as_asgi())]),
})
