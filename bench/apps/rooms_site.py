"""The rooms workload of bench/rooms (issue 20), shaped like djust's
snake-arena: a Django project with a sync Channels WebsocketConsumer.

/ws/rooms/<k>/          rooms of 4 clients (the client picks k); the first
                        member's connection starts a ticker task for the
                        room that group_sends a tick every 1/ROOMS_TICK_HZ s
                        (6); every member's sync room_tick renders the board
                        from a small Django template and sends
                        "t <tick> <html>".
  a text "k <ns> <dir>" a key press: saved through the ORM (Move, an INSERT
                        and its COMMIT in autocommit, PostgreSQL with
                        synchronous_commit on), the player moves, the board
                        is rendered and the presser gets "a <ns> <html>".
  ?block=1              this session's key handler also sleeps 200 ms, at
                        most once a second (the blocker arm).
/sleep/?s=1             a sync view that sleeps (bench/rooms/overload.py).

ROOMS_PG: the PostgreSQL socket directory (bench/rooms/pg.sh); database
"rooms", user postgres, table rooms_move made by bench/rooms/run.py.
CONN_MAX_AGE=None: each thread keeps its connection.

Issue 21's arms (bench/rooms/run.py sets these; the defaults are issue
20's workload):

ROOMS_LAYER       memory (Channels' InMemoryChannelLayer, the default),
                  turnstile (turnstile.channels.ChannelLayer), redis
                  (channels_redis's RedisChannelLayer) or pubsub
                  (channels_redis's RedisPubSubChannelLayer); capacity
                  1000 where the layer has one.
ROOMS_REDIS       Redis's address for redis and pubsub
                  (unix:///path/redis.sock or redis://host:port).
ROOMS_TICKS       channels (the default): the ticker group_sends
                  {"type": "room.tick"} and every member's sync room_tick
                  renders the board and sends it; fanout (turnstile's
                  layer only): the ticker renders the board once and
                  group_send_frames it, Go writes it to every member's
                  socket and no member's Python runs (README, "Fan-out
                  without Python"). The frame is the same text either way:
                  render() does not depend on the member.
ROOMS_WORK        db (the default): a key press is the ORM INSERT above;
                  cpu: no database, the key press runs cpu_work() instead,
                  ROOMS_CPU_ITERS (3000) rounds of pure-Python arithmetic
                  holding the GIL: a fixed amount of work, the same on every
                  server (run.py records its cost per call in the meta).
ROOMS_CLOCK_DIR   a directory: with several worker processes each runs its
                  own RoomState, and a room's members may sit on different
                  workers, so only the worker holding flock() on
                  <dir>/room-<k> runs the room's ticker (the others retry
                  every tick period, so one takes over when the holder's
                  members leave). Without it every process ticks its rooms.
                  A room's board (positions, scores) is the state of the
                  process that renders it: per worker, as an app keeping
                  it in process memory would have it; the work per frame
                  is the same.
"""
import asyncio
import fcntl
import os
import threading
import time
from urllib.parse import parse_qs

import django
from django.conf import settings

LAYER = os.environ.get("ROOMS_LAYER", "memory")
REDIS = os.environ.get("ROOMS_REDIS", "")
LAYERS = {
    "memory": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}},
    "turnstile": {"BACKEND": "turnstile.channels.ChannelLayer", "CONFIG": {"capacity": 1000}},
    "redis": {"BACKEND": "channels_redis.core.RedisChannelLayer",
              "CONFIG": {"hosts": [{"address": REDIS}], "capacity": 1000}},
    "pubsub": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
               "CONFIG": {"hosts": [{"address": REDIS}]}},
}
if LAYER not in LAYERS:
    raise SystemExit("ROOMS_LAYER=%r: one of %s" % (LAYER, ", ".join(LAYERS)))
TICKS = os.environ.get("ROOMS_TICKS", "channels")
if TICKS not in ("channels", "fanout") or (TICKS == "fanout" and LAYER != "turnstile"):
    raise SystemExit("ROOMS_TICKS=%r: channels, or fanout with ROOMS_LAYER=turnstile" % TICKS)
WORK = os.environ.get("ROOMS_WORK", "db")
if WORK not in ("db", "cpu"):
    raise SystemExit("ROOMS_WORK=%r: db or cpu" % WORK)
CPU_ITERS = int(os.environ.get("ROOMS_CPU_ITERS", "3000"))
CLOCK_DIR = os.environ.get("ROOMS_CLOCK_DIR", "")

settings.configure(
    DEBUG=False,
    SECRET_KEY="rooms-bench",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    DATABASES={"default": {"ENGINE": "django.db.backends.postgresql",
                           "HOST": os.environ.get("ROOMS_PG", "/tmp"), "NAME": "rooms", "USER": "postgres",
                           "CONN_MAX_AGE": None}},
    INSTALLED_APPS=["channels"],
    CHANNEL_LAYERS={"default": LAYERS[LAYER]},
    MIDDLEWARE=[],
    USE_TZ=False,
)
django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from channels.generic.websocket import WebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.db import models  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.template import Context, Engine  # noqa: E402
from django.urls import path  # noqa: E402

TICK_HZ = float(os.environ.get("ROOMS_TICK_HZ", "6"))
SIZE = 10
MOVES = {"u": (0, -1), "d": (0, 1), "l": (-1, 0), "r": (1, 0)}


def cpu_work(seed, iters=CPU_ITERS):
    """ROOMS_WORK=cpu: a key press's work in place of the INSERT: iters
    rounds of a linear congruential step in pure Python (the GIL held
    throughout, nothing released); returns the last value (an int < 2**31)."""
    h = seed & 0x7FFFFFFF
    for _ in range(iters):
        h = (h * 1103515245 + 12345) & 0x7FFFFFFF
    return h


class Move(models.Model):
    room = models.IntegerField()
    player = models.CharField(max_length=64)
    key = models.CharField(max_length=1)
    sent_ns = models.BigIntegerField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "rooms"
        db_table = "rooms_move"
        managed = False


BOARD = Engine(debug=False).from_string(
    '<table class="board" data-room="{{ room }}" data-tick="{{ tick }}">'
    "{% for row in rows %}<tr>{% for cell in row %}<td{% if cell %} class=\"p{{ cell }}\"{% endif %}>"
    "{{ cell|default:'' }}</td>{% endfor %}</tr>{% endfor %}</table>"
    '<ul class="scores">{% for p in players %}<li>{{ p.n }}: {{ p.score }}</li>{% endfor %}</ul>')


class RoomState:
    """One room's board: players' positions and scores (one lock: its
    members' handlers may run on different threads)."""

    def __init__(self, room):
        self.room, self.lock, self.players, self.tick, self.members = room, threading.Lock(), {}, 0, 0
        self.task = None  # the ticker

    def render(self):
        with self.lock:
            rows = [[0] * SIZE for _ in range(SIZE)]
            players = []
            for i, (name, p) in enumerate(sorted(self.players.items()), 1):
                rows[p[1]][p[0]] = i
                players.append({"n": i, "score": p[2]})
            ctx = {"room": self.room, "tick": self.tick, "rows": rows, "players": players}
        return BOARD.render(Context(ctx))


ROOMS = {}


def room_state(k):
    st = ROOMS.get(k)
    if st is None:
        st = ROOMS.setdefault(k, RoomState(k))
    return st


class Arena(WebsocketConsumer):
    def connect(self):
        self.k = int(self.scope["url_route"]["kwargs"]["k"])
        self.group = "room-%d" % self.k
        self.block = parse_qs(self.scope.get("query_string", b"").decode()).get("block") == ["1"]
        self.last_block = 0.0
        self.state = room_state(self.k)
        with self.state.lock:
            self.state.players[self.channel_name] = [len(self.state.players) % SIZE, 0, 0]
        async_to_sync(self.channel_layer.group_add)(self.group, self.channel_name)
        self.accept()

    def receive(self, text_data=None, bytes_data=None):
        parts = (text_data or "").split(" ")
        if len(parts) < 3 or parts[0] != "k":
            return
        ns, key = parts[1], parts[2][:1]
        if self.block and time.monotonic() - self.last_block >= 1.0:
            self.last_block = time.monotonic()
            time.sleep(0.2)
        if WORK == "cpu":
            cpu_work(int(ns))
        else:
            Move.objects.create(room=self.k, player=self.channel_name[-16:], key=key, sent_ns=int(ns))
        dx, dy = MOVES.get(key, (0, 0))
        with self.state.lock:
            p = self.state.players.get(self.channel_name)
            if p is not None:
                p[0], p[1], p[2] = (p[0] + dx) % SIZE, (p[1] + dy) % SIZE, p[2] + 1
        self.send("a %s %s" % (ns, self.state.render()))

    def room_tick(self, event):
        self.send("t %d %s" % (event["tick"], self.state.render()))

    def disconnect(self, code):
        with self.state.lock:
            self.state.players.pop(self.channel_name, None)
        async_to_sync(self.channel_layer.group_discard)(self.group, self.channel_name)


async def ticker(st):
    """The room's clock: a tick to every member TICK_HZ times a second
    while the room has members (ROOMS_CLOCK_DIR: and this process holds
    the room's clock lock)."""
    layer = get_channel_layer()
    period = 1.0 / TICK_HZ
    clock = None
    try:
        if CLOCK_DIR:
            clock = os.open(os.path.join(CLOCK_DIR, "room-%d" % st.room), os.O_RDWR | os.O_CREAT, 0o600)
            while True:
                try:
                    fcntl.flock(clock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:  # another worker's ticker runs this room
                    if st.members <= 0:
                        return
                    await asyncio.sleep(period)
        await tick(st, layer, period)
    finally:
        if clock is not None:
            os.close(clock)  # releases the lock


async def tick(st, layer, period):
    group = "room-%d" % st.room
    nxt = asyncio.get_running_loop().time()
    while st.members > 0:
        st.tick += 1
        if TICKS == "fanout":  # rendered once, written to every member's socket by Go
            await layer.group_send_frames(group, text="t %d %s" % (st.tick, st.render()))
        else:
            await layer.group_send(group, {"type": "room.tick", "tick": st.tick})
        nxt += period
        now = asyncio.get_running_loop().time()
        if nxt < now:  # behind (an overloaded loop): skip the missed ticks, as a game clock does
            nxt = now
        await asyncio.sleep(nxt - now)


arena = URLRouter([path("ws/rooms/<int:k>/", Arena.as_asgi())])


async def websocket(scope, receive, send):
    """Counts a room's members and starts its ticker at the first one."""
    try:
        k = int(scope["path"].strip("/").split("/")[-1])
    except ValueError:
        return await arena(scope, receive, send)
    st = room_state(k)
    st.members += 1
    if st.task is None or st.task.done():
        st.task = asyncio.get_running_loop().create_task(ticker(st))
    try:
        return await arena(scope, receive, send)
    finally:
        st.members -= 1


def sleep_view(request):
    time.sleep(float(request.GET.get("s", "1")))
    return JsonResponse({"pid": os.getpid(), "thread": threading.current_thread().name})


def ok_view(request):
    return JsonResponse({"pid": os.getpid()})


urlpatterns = [path("sleep/", sleep_view), path("", ok_view)]

application = ProtocolTypeRouter({"http": get_asgi_application(), "websocket": websocket})
