"""A Channels rooms site on turnstile.channels.ChannelLayer for
tests/chlayer_test.go: TestChannelLayer_Rooms.

/ws/async/ROOM/  an AsyncWebsocketConsumer: joins group ROOM; each text
                 frame is group_sent to the room.
/ws/sync/ROOM/   a WebsocketConsumer doing the same with
                 async_to_sync(group_add / group_send).
/push/ROOM/?text=T  a sync Django view: async_to_sync(group_send).

Every member gets {"text", "via"} for each message of its room, in the
order the layer took them. ?hello=1: the session's first frame is
{"hello": the worker's pid, "loop": the loop thread serving it
(ts-loop-N)}. An async member's frames also carry "on": the thread its
handler ran on (its own loop's, when the layer resolves its receive there).

ROOMS_ASYNCIO_DEBUG=1: each session turns its loop's asyncio debug mode on,
so a future resolved or a callback scheduled from another thread raises
asyncio's "Non-thread-safe operation" error instead of passing silently.

ROOMS_LAYER=djust: djust's MultiLoopInMemoryChannelLayer instead of
turnstile's (tests/chlayer_loops_test.go).
"""
import asyncio
import json
import os
import threading

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="chlayer-test",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": {
        "BACKEND": {
            "djust": "djust.layers.MultiLoopInMemoryChannelLayer",
        }.get(os.environ.get("ROOMS_LAYER", ""), "turnstile.channels.ChannelLayer"),
        "CONFIG": {"capacity": 1000},
    }},
    MIDDLEWARE=[],
    DATABASES={},
)
django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer, WebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


def push(request, room):
    async_to_sync(get_channel_layer().group_send)(
        room, {"type": "room.message", "text": request.GET.get("text", ""), "via": "view"}
    )
    return JsonResponse({"ok": True})


urlpatterns = [path("push/<str:room>/", push)]

if os.environ.get("ROOMS_LAYER") == "djust":
    # An in-process layer must be one instance: made here, at import, not
    # lazily by the first session of each loop at once (README, "The channel
    # layer"). turnstile's layer is left lazy: its instances share Go's store.
    get_channel_layer()


def _debug_loop():
    if os.environ.get("ROOMS_ASYNCIO_DEBUG"):
        loop = asyncio.get_running_loop()
        if not loop.get_debug():
            loop.set_debug(True)
            loop.slow_callback_duration = 10.0  # thread checks only, no slow-callback noise


class AsyncRoom(AsyncWebsocketConsumer):
    async def connect(self):
        _debug_loop()
        self.room = self.scope["url_route"]["kwargs"]["room"]
        await self.channel_layer.group_add(self.room, self.channel_name)
        await self.accept()
        if b"hello=1" in self.scope["query_string"]:
            # which worker and loop serve this session (tests/chlayer_test.go, chlayer_loops_test.go)
            await self.send(text_data=json.dumps({"hello": os.getpid(), "loop": threading.current_thread().name, "layer": id(self.channel_layer)}))

    async def disconnect(self, code):
        await self.channel_layer.group_discard(self.room, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        await self.channel_layer.group_send(self.room, {"type": "room.message", "text": text_data, "via": "async"})

    async def room_message(self, event):
        await self.send(text_data=json.dumps({"text": event["text"], "via": event["via"], "on": threading.current_thread().name}))


class SyncRoom(WebsocketConsumer):
    async def __call__(self, scope, receive, send):
        self.loop_name = threading.current_thread().name  # the handlers run on sync threads
        _debug_loop()
        return await super().__call__(scope, receive, send)

    def connect(self):
        self.room = self.scope["url_route"]["kwargs"]["room"]
        async_to_sync(self.channel_layer.group_add)(self.room, self.channel_name)
        self.accept()
        if b"hello=1" in self.scope["query_string"]:
            self.send(text_data=json.dumps({"hello": os.getpid(), "loop": self.loop_name, "layer": id(self.channel_layer)}))

    def disconnect(self, code):
        async_to_sync(self.channel_layer.group_discard)(self.room, self.channel_name)

    def receive(self, text_data=None, bytes_data=None):
        async_to_sync(self.channel_layer.group_send)(self.room, {"type": "room.message", "text": text_data, "via": "sync"})

    def room_message(self, event):
        self.send(text_data=json.dumps({"text": event["text"], "via": event["via"]}))


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([
        path("ws/async/<str:room>/", AsyncRoom.as_asgi()),
        path("ws/sync/<str:room>/", SyncRoom.as_asgi()),
    ]),
})
