"""turnstile.channels: a Channels layer whose messages and groups live in
turnstile's Go side (internal/chlayer), not in Python objects.

Configure it like any other backend::

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "turnstile.channels.ChannelLayer",
            "CONFIG": {"capacity": 100, "expiry": 60},
        }
    }

CONFIG: ``capacity`` (messages per channel, 100), ``channel_capacity``
(glob or compiled pattern -> capacity, the first match wins), ``expiry``
(seconds a queued message lives, 60), ``group_expiry`` (seconds a
membership lives, 86400), ``prefix`` (the namespace, "asgi": instances of
one prefix share channels and groups, as channels_redis instances of one
prefix share Redis keys).

Each call crosses into Go once: ``send`` and ``group_send`` carry the
message as msgpack bytes (as channels_redis serialises it); Go appends to
each member's queue, or hands the message straight to a receive waiting
on it and wakes that receive's loop once per batch through an eventfd the
loop reads (``loop.add_reader``). A ``receive`` on a channel with messages
queued takes one in one call; one with nothing queued registers a waiter
and awaits a future that the loop's reader resolves: the future is always
resolved on the loop that awaits it.

Errors are the ones Channels' other layers raise: ``TypeError`` for a bad
channel or group name or a message that is not a dict, ``ChannelFull`` at a
channel's capacity, ``LayerMemoryFull`` (a ``ChannelFull``) at the
worker's limit of queued bytes, ``ValueError`` for a message over the size
limit; nothing is stored then, but for a ``group_send`` at the worker's
limit, which still reaches the members with a receive waiting (see its
doc).

turnstile's own addition: ``group_send_frames(group, text=|bytes=)`` (and
``send_frames``, its sync form) writes one WebSocket message to the socket
of every member whose channel is a WebSocket session's, from Go, running
no member's consumer (README, "Fan-out without Python").

This module exists only inside turnstile (the binary serves it). Under
plain Python (a management command, a test run) use
``channels.layers.InMemoryChannelLayer`` for one process, or
``channels_redis`` across hosts.
"""

import asyncio
import collections
import json
import logging
import os
import sys
import uuid
import weakref

try:
    import _turnstile_layer as _L
except ImportError:  # pragma: no cover - only outside turnstile
    raise ImportError(
        "turnstile.channels.ChannelLayer runs only inside the turnstile server; "
        "under plain Python use channels.layers.InMemoryChannelLayer (one process) "
        "or channels_redis.core.RedisChannelLayer"
    ) from None

import msgpack
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

__all__ = ["ChannelLayer", "ChannelFull", "LayerMemoryFull"]

logger = logging.getLogger("turnstile.channels")

# Codes of _turnstile_layer (internal/python/layer.c).
_FULL, _MEMORY, _TOO_LARGE, _HANDLE, _WAIT = 1, 2, 3, 4, 5


class LayerMemoryFull(ChannelFull):
    """The worker's limit of queued message bytes is reached (every layer
    and channel together): nothing was stored (send), or the message
    reached only the members with a receive waiting (group_send)."""


def _pack(message):
    return msgpack.packb(message, use_bin_type=True)


def _unpack(data):
    return msgpack.unpackb(data, raw=False)


class _Endpoint:
    """One loop's receiving end: Go's endpoint id and eventfd, the futures
    of receives waiting per channel, and messages delivered to a receive
    that was cancelled meanwhile (stash: the next receive takes them
    first)."""

    __slots__ = ("id", "fd", "waiters", "stash", "consumed", "__weakref__")

    def __init__(self, loop):
        self.id, self.fd = _L.endpoint()
        self.waiters = {}
        self.stash = {}
        self.consumed = set()
        loop.add_reader(self.fd, self.drain)
        weakref.finalize(loop, _L.close_endpoint, self.id)

    def drain(self):
        for channel, data in _L.take(self.id):
            q = self.waiters.get(channel)
            while q:
                fut = q.popleft()
                if not q:
                    del self.waiters[channel]
                if fut.cancelled():
                    # Go served this waiter: its receive must not withdraw it.
                    self.consumed.add(fut)
                    continue
                fut.set_result(data)
                break
            else:
                self.stash.setdefault(channel, collections.deque()).append(data)


class ChannelLayer(BaseChannelLayer):
    """A Channels layer held by turnstile: see the module's doc."""

    extensions = ["groups", "flush"]

    def __init__(
        self,
        expiry=60,
        group_expiry=86400,
        capacity=100,
        channel_capacity=None,
        prefix="asgi",
    ):
        super().__init__(expiry=expiry, capacity=capacity, channel_capacity=channel_capacity)
        self.channel_capacity = self.compile_capacities(channel_capacity or {})
        self.group_expiry = group_expiry
        self.prefix = prefix
        # "-p<pid>": Go routes a send to this process's channels through
        # the master when the host has several workers (chlayer.ChannelPID).
        self.client_prefix = "%s-p%d" % (uuid.uuid4().hex[:16], os.getpid())
        patterns = []
        for pattern, value in (channel_capacity or {}).items():
            if hasattr(pattern, "match"):
                patterns.append(["re", pattern.pattern, int(value)])
            else:
                patterns.append(["glob", str(pattern), int(value)])
        config = {
            "prefix": str(prefix),
            "capacity": int(capacity),
            "expiry": float(expiry),
            "group_expiry": float(group_expiry),
            "channel_capacity": patterns,
        }
        self._h = _L.open(json.dumps(config).encode())
        self._endpoints = weakref.WeakKeyDictionary()

    def _raise(self, rc, channel, size=0):
        if rc == _FULL:
            raise ChannelFull(channel)
        if rc == _MEMORY:
            raise LayerMemoryFull(
                "turnstile channel layer: the worker's limit of queued message bytes "
                "is reached; the message for %r was not stored" % channel
            )
        if rc == _TOO_LARGE:
            raise ValueError(
                "turnstile channel layer: a message of %d bytes (msgpack) is over the size limit" % size
            )
        raise RuntimeError("turnstile channel layer: no such layer or endpoint (code %d)" % rc)

    # Channel layer API

    async def send(self, channel, message):
        """Queue message (a dict) on channel: ChannelFull at its capacity."""
        if not isinstance(message, dict):
            raise TypeError("message must be a dict, not %s" % type(message).__name__)
        self.require_valid_channel_name(channel)
        data = _pack(message)
        rc = _L.send(self._h, channel, data)
        if rc:
            self._raise(rc, channel, len(data))

    async def receive(self, channel):
        """The oldest message of channel, waiting for one if none is queued.
        Cancelling the wait consumes nothing."""
        self.require_valid_channel_name(channel)
        if "!" in channel:
            assert self.non_local_name(channel).endswith(self.client_prefix + "!"), "Wrong client prefix"
        loop = asyncio.get_running_loop()
        ep = self._endpoints.get(loop)
        if ep is None:
            ep = self._endpoints[loop] = _Endpoint(loop)
        stash = ep.stash.get(channel)
        if stash:
            data = stash.popleft()
            if not stash:
                del ep.stash[channel]
            return _unpack(data)
        r = _L.receive(self._h, ep.id, channel)
        if r.__class__ is bytes:
            return _unpack(r)
        if r != _WAIT:
            self._raise(r, channel)
        fut = loop.create_future()
        q = ep.waiters.get(channel)
        if q is None:
            q = ep.waiters[channel] = collections.deque()
        q.append(fut)
        try:
            data = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # Delivered, then cancelled before it resumed: keep it.
                ep.stash.setdefault(channel, collections.deque()).appendleft(fut.result())
            elif fut in ep.consumed:
                ep.consumed.discard(fut)
            else:
                q = ep.waiters.get(channel)
                if q is not None:
                    try:
                        q.remove(fut)
                    except ValueError:
                        pass
                    if not q:
                        del ep.waiters[channel]
                _L.unwait(self._h, ep.id, channel)
            raise
        return _unpack(data)

    async def new_channel(self, prefix="specific"):
        """A new process-specific channel name: prefix.client!unique.
        Made inside a WebSocket session's task (a consumer's channel), it
        is linked to that socket for group_send_frames."""
        name = "%s.%s!%s" % (prefix, self.client_prefix, uuid.uuid4().hex)
        tag = _ws_tag()
        if tag:
            _L.bind_socket(name, tag)
        return name

    async def flush(self):
        """Drop every message and group of this layer's prefix."""
        _L.flush(self._h)

    async def close(self):
        pass

    # Groups extension

    async def group_add(self, group, channel):
        """Add channel to group (renewing its group_expiry)."""
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        rc = _L.group(self._h, 0, group, channel)
        if rc:
            self._raise(rc, channel)

    async def group_discard(self, group, channel):
        """Remove channel from group."""
        self.require_valid_channel_name(channel)
        self.require_valid_group_name(group)
        rc = _L.group(self._h, 1, group, channel)
        if rc:
            self._raise(rc, channel)

    async def group_send(self, group, message):
        """Queue message on every member of group; members at capacity are
        skipped (and counted in one INFO record, as channels_redis logs).
        Past --channel-layer-memory, members that would have to queue it
        go without, those with a receive waiting still get it, and
        LayerMemoryFull is raised with how many got it: unlike send, not
        "nothing stored", so a retry reaches those again. Under --workers
        2 or more the fan-out happens in each worker after the call
        returns: nothing is raised, the members that went without are
        counted in turnstile_layer_messages_dropped_total{reason="rejected"}."""
        if not isinstance(message, dict):
            raise TypeError("message must be a dict, not %s" % type(message).__name__)
        self.require_valid_group_name(group)
        data = _pack(message)
        rc, members, full = _L.group_send(self._h, group, data)
        if full:
            logger.info("%s of %s channels over capacity in group %s", full, members + full, group)
        if rc == _MEMORY:
            raise LayerMemoryFull(
                "turnstile channel layer: the worker's limit of queued message bytes is reached; "
                "the message for group %r reached %d member(s) (a receive waiting, or room left) "
                "and was not stored for the others" % (group, members)
            )
        if rc:
            self._raise(rc, group, len(data))

    # Fan-out to sockets (turnstile's own; README "Fan-out without Python")

    async def group_send_frames(self, group, *, text=None, bytes=None):
        """Write one WebSocket message (text: a str, or bytes: binary) to
        the socket of every member of group whose channel belongs to a
        WebSocket session (a consumer's channel_name), on every worker.
        Go writes it; no member's consumer runs. See send_frames."""
        self.send_frames(group, text=text, bytes=bytes)

    def send_frames(self, group, *, text=None, bytes=None):
        """group_send_frames for sync code (a sync consumer, a view, a
        thread): the same call, no event loop needed, no async_to_sync.

        Raises TypeError for a bad group name, for neither or both of
        text and bytes, for text not a str or bytes not bytes-like;
        ValueError for a message over the layer's size limit
        (--channel-layer-max-message) or text that is not encodable as
        UTF-8. Members without a socket (a channel not made in a
        WebSocket session), or whose session has ended or is not accepted
        yet, are skipped; a session with 1024 fan-out frames (or 4 MiB)
        not yet written drops the frame (counted in /metrics)."""
        self.require_valid_group_name(group)
        if (text is None) == (bytes is None):
            raise TypeError("send_frames takes exactly one of text= and bytes=")
        if text is not None:
            if not isinstance(text, str):
                raise TypeError("text must be a str, not %s" % type(text).__name__)
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError("text is not encodable as UTF-8: %s" % exc) from None
        else:
            if not isinstance(bytes, _BYTES_LIKE):
                raise TypeError("bytes must be bytes-like, not %s" % type(bytes).__name__)
            data = _bytes(bytes)
        rc, _sockets = _L.group_send_frames(self._h, group, text is not None, data)
        if rc:
            self._raise(rc, group, len(data))


_bytes = bytes  # send_frames' keyword argument is named bytes, as websocket.send's key
_BYTES_LIKE = (bytes, bytearray, memoryview)
_asgi_module = None


def _ws_tag():
    """The current WebSocket session's tag (_asgi.py's _ws_tag), 0 outside
    one."""
    global _asgi_module
    m = _asgi_module
    if m is None:
        m = sys.modules.get("_turnstile_asgi_py")
        if m is None:
            return 0
        _asgi_module = m
    return m._ws_tag.get()
