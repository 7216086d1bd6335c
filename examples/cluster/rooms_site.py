"""The rooms app of examples/cluster (issue 23): a Django Channels site
whose groups span every host through Redis (channels_redis), run by
tests/cluster_test.go.

/who/                 JSON: the host serving (CLUSTER_HOST), the worker's
                      pid, and who the client is to the app (REMOTE_ADDR,
                      REMOTE_PORT, the raw X-Forwarded-For): the client
                      address must be the one the balancer's PROXY header
                      gave, never a header a client wrote.
/push/ROOM/?text=T    an async view: group_send T to ROOM ("from": "http");
                      503 {"error"} when the layer fails (Redis down).
/ws/room/ROOM/        an AsyncWebsocketConsumer: joins group ROOM, sends
                      {"hello": host, "pid"} first; each text frame is
                      group_sent to ROOM; every member gets {"text",
                      "from": the sender's host} in the order Redis took
                      them.
/stall/?s=S           only with CLUSTER_STALL=1 (the test): blocks its
                      worker's event loop S seconds (time.sleep on the
                      loop), so the host's /readyz says 503.

Settings from the environment: CLUSTER_HOST (a name for logs and /who/),
REDIS_URL (default redis://127.0.0.1:6379/0), CHANNEL_LAYER=pubsub (the
default, channels_redis.pubsub.RedisPubSubChannelLayer) or core
(channels_redis.core.RedisChannelLayer). No database.
"""
import json
import os
import time

import django
from django.conf import settings

HOST = os.environ.get("CLUSTER_HOST", "")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

# The channels_redis settings (README.md, "The channel layer"):
LAYERS = {
    # Redis pub/sub: a group send is one PUBLISH, Redis pushes it to every
    # subscribed process; nothing is stored, so a message sent while
    # Redis is down is lost (the sender gets an error).
    "pubsub": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
               "CONFIG": {"hosts": [REDIS_URL]}},
    # Lists: a group send is a Lua script that pushes onto every member's
    # list; receivers poll with BZPOPMIN. Capacity and expiry bound it.
    # socket_timeout above the layer's 5 s BZPOPMIN: redis-py 8 reads with
    # a 5 s socket timeout by default, so an idle session's receive raised
    # redis.exceptions.TimeoutError and the consumer ended with 1011.
    "core": {"BACKEND": "channels_redis.core.RedisChannelLayer",
             "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10}],
                        "capacity": 1000, "expiry": 60}},
}

settings.configure(
    DEBUG=False,
    SECRET_KEY="cluster-example",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": LAYERS[os.environ.get("CHANNEL_LAYER", "pubsub")]},
    MIDDLEWARE=[],
    DATABASES={},
)
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


async def who(request):
    return JsonResponse({
        "host": HOST,
        "pid": os.getpid(),
        "client": request.META.get("REMOTE_ADDR"),
        "port": request.META.get("REMOTE_PORT"),
        "xff": request.META.get("HTTP_X_FORWARDED_FOR"),
    })


async def push(request, room):
    try:
        await get_channel_layer().group_send(
            room, {"type": "room.message", "text": request.GET.get("text", ""), "from": "http"})
    except Exception as e:  # Redis down: the client sees it, the log has it
        print("push: group_send failed: %r" % (e,))
        return JsonResponse({"error": repr(e)}, status=503)
    return JsonResponse({"ok": True, "host": HOST})


async def stall(request):
    time.sleep(float(request.GET.get("s", "1")))  # on the loop, on purpose
    return JsonResponse({"stalled": True, "host": HOST})


# The layer is made here, at import, not by the first session: importing
# channels_redis and redis-py on the event loop stalled it ~300 ms, past
# --loop-stall-threshold, so every host's /readyz said 503 at once and
# HAProxy took them all out (tests/cluster_test.go, its first run).
get_channel_layer()

urlpatterns = [path("who/", who), path("push/<str:room>/", push)]
if os.environ.get("CLUSTER_STALL") == "1":
    urlpatterns.append(path("stall/", stall))


class Room(AsyncWebsocketConsumer):
    async def connect(self):
        self.room = self.scope["url_route"]["kwargs"]["room"]
        await self.channel_layer.group_add(self.room, self.channel_name)
        await self.accept()
        await self.send(text_data=json.dumps({"hello": HOST, "pid": os.getpid()}))

    async def disconnect(self, code):
        try:
            await self.channel_layer.group_discard(self.room, self.channel_name)
        except Exception:  # Redis down: its subscriptions went with it
            pass

    async def receive(self, text_data=None, bytes_data=None):
        await self.channel_layer.group_send(
            self.room, {"type": "room.message", "text": text_data, "from": HOST})

    async def room_message(self, event):
        await self.send(text_data=json.dumps({"text": event["text"], "from": event["from"]}))


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([path("ws/room/<str:room>/", Room.as_asgi())]),
})
