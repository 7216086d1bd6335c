"""ASGI on a loop thread (ts-loop-N): the HTTP and lifespan protocols.

Loaded from the binary (python/embed.go) by internal/asgi's loop.c, once
per process, which calls run() on each loop thread with that loop's
LoopBridge. Go pushes events on the loop's C-side queue and the loop drains
them in one add_reader callback (drain); this module turns them into ASGI
messages. The C object ``Channel`` (one per request) hands the app's
messages to Go without blocking; for HTTP it is the app's send callable:
see internal/asgi/channel.c and send.c.

Names follow the ASGI spec (HTTP & WebSocket 2.4, WebSocket 2.5 with the
disconnect reason, Lifespan 2.0). WebSockets: Go owns the protocol (framing,
ping/pong, limits, the close handshake; internal/asgi/websocket.go); WSCycle
only turns messages into ASGI events and back.
"""

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import queue
import sys
import threading

import _turnstile
import _turnstile_asgi as _bridge

from _turnstile_bootstrap import format_exception

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
NEW, BODY, DISCONNECT, DRAINED, STOP, WS_NEW, WS_MSG, WS_CLOSE = 1, 2, 3, 4, 5, 6, 7, 8
CALL_DONE = 10  # a sync call ran on a pool thread (internal/asgi/call.c)


class ClientDisconnected(OSError):
    """send() on a connection the client has closed (ASGI 2.4: a server
    raises a subclass of OSError)."""


def _log(level, text, **fields):
    """One record to the server log. fields (str values) make it a server
    record shaped as internal/wsgi's: "asgi: app raised" with method,
    target and traceback, as "wsgi: app raised" has them."""
    _turnstile.log(level, text, **fields)


def _target(scope):
    """The request target for a record: raw_path and the query string, as
    internal/wsgi logs the request's target."""
    target = bytes(scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape"))
    if scope.get("query_string"):
        target += b"?" + bytes(scope["query_string"])
    return target.decode("latin-1")


def _traceback(exc):
    """The traceback text of an exception the app raised, from the app's
    own frames: this module's frames that called the app are left out, as
    they are from a WSGI app's traceback (called from C)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_globals is globals():
        tb = tb.tb_next
    if tb is None:
        return format_exception(exc)
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")


class _DrainWait:
    """A send() that found more than --write-buffer bytes pending waits for
    Go to write them (DRAINED); both cycles. Subclasses have the slots loop
    and drain_waiter."""

    __slots__ = ()

    def _on_drained(self):
        dw = self.drain_waiter
        if dw is not None and not dw.done():
            dw.set_result(None)

    async def _drain_wait(self):
        fut = self.loop.create_future()
        self.drain_waiter = fut
        try:
            await fut
        finally:
            self.drain_waiter = None


class HTTPCycle(_DrainWait):
    """One HTTP request: the app's receive callable and the events Go sends.

    The app's send callable is the C Channel itself (send.c):
    it validates each message, hands it to Go and returns a finished
    awaitable; it holds the started/complete/disconnected state and calls
    back here only to wait for Go to drain (_drain_wait) and to end a
    receive() waiting for the response to complete (_final).
    """

    __slots__ = ("chan", "scope", "loop", "first", "messages", "asked", "waiter", "drain_waiter")

    def __init__(self, chan, scope, body, more, loop):
        self.chan = chan
        self.scope = scope
        self.loop = loop
        # no body here yet: the first receive() asks Go for it, rather than
        # returning an empty chunk first
        self.first = {"type": "http.request", "body": body, "more_body": more} if body or not more else None
        self.messages = None  # a deque, once a message must wait behind first
        self.asked = False
        self.waiter = None
        self.drain_waiter = None

    # ASGI HTTP, "Request - receive event" and "Disconnect - receive event"
    async def receive(self):
        m = self.first
        if m is not None:
            self.first = None
            return m
        if self.messages:
            return self.messages.popleft()
        chan = self.chan
        if chan.disconnected or chan.complete:
            return {"type": "http.disconnect"}
        if not self.asked:
            # Before the end of the body: the next chunk. After it: watch
            # for the client leaving (Go starts that only when asked).
            self.asked = True
            chan.want_body()
        fut = self.loop.create_future()
        self.waiter = fut
        try:
            return await fut
        finally:
            if self.waiter is fut:
                self.waiter = None

    def _deliver(self, message):
        # A receive() that was cancelled consumed nothing: keep the message.
        w = self.waiter
        if w is not None and not w.done():
            self.waiter = None
            w.set_result(message)
        else:
            if self.messages is None:
                self.messages = collections.deque()
            self.messages.append(message)

    def _on_body(self, body, more):
        self.asked = False
        self._deliver({"type": "http.request", "body": body, "more_body": more})

    def _on_disconnect(self):
        chan = self.chan
        if chan.disconnected:
            return
        chan.disconnected = True
        w = self.waiter
        if w is not None and not w.done() and not self.messages and self.first is None:
            self.waiter = None
            w.set_result({"type": "http.disconnect"})
        dw = self.drain_waiter
        if dw is not None and not dw.done():
            dw.set_exception(ClientDisconnected("the client disconnected"))

    def _final(self):
        # The final body was sent: a receive() waiting now gets http.disconnect.
        w = self.waiter
        if w is not None and not w.done():
            self.waiter = None
            w.set_result({"type": "http.disconnect"})


_OTHER_LOOP = ("bound to a different event loop", "attached to a different loop", "different event loop")
LOOP_HINT = (
    "an asyncio object (Lock, Queue, Event, Future, Task) made on one event loop was used "
    "from another: with --loops N each loop serves its own connections, so keep asyncio "
    "objects per loop (create them in lifespan startup, whose state is per loop, or lazily "
    "per loop) and guard module-level state with threading.Lock (README, \"Several event loops\")"
)


def _loop_hint(exc):
    """LOOP_HINT when exc (or an exception in its chain) is asyncio's
    refusal of an object of another loop, else None."""
    for _ in range(8):
        if exc is None:
            return None
        if isinstance(exc, (RuntimeError, ValueError)) and any(m in str(exc) for m in _OTHER_LOOP):
            return LOOP_HINT
        exc = exc.__cause__ or exc.__context__
    return None


def _app_raised(text, scope, exc, method=None):
    """Log the app's exception ("asgi: app raised"), with LOOP_HINT when it
    is an object of another event loop."""
    fields = {"method": method or str(scope.get("method")), "target": _target(scope), "traceback": _traceback(exc)}
    hint = _loop_hint(exc)
    if hint:
        fields["hint"] = hint
    _log(ERROR, text, **fields)


def _from_disconnect(exc):
    """True when exc is the client leaving (an OSError such as send()'s
    ClientDisconnected, a cancelled task), or was raised while handling
    send()'s ClientDisconnected: Starlette, told spec_version 2.4, turns it
    into its own ClientDisconnect inside the except block, so it is the
    __context__. Another OSError deeper in the chain is the app's own."""
    if isinstance(exc, (OSError, asyncio.CancelledError)):
        return True
    for _ in range(8):
        exc = exc.__cause__ or exc.__context__
        if exc is None:
            return False
        if isinstance(exc, ClientDisconnected):
            return True
    return False


async def _run_http(app, cycle):
    chan = cycle.chan
    bound = _bind(HTTP_POOL, chan.tag, app) if "asgiref.sync" in _modules else None
    if bound == -1:
        await _busy(chan)
        return
    try:
        await app(cycle.scope, cycle.receive, chan)
    except BaseException as exc:  # noqa: B902 - the app's failure is reported, never raised into the loop
        if chan.disconnected and _from_disconnect(exc):
            chan.done(None)  # the client left: not an app error
        else:
            _app_raised("asgi: app raised", cycle.scope, exc)
            chan.done("error")
    else:
        if chan.disconnected:
            chan.done(None)
        elif not chan.started:
            scope = cycle.scope
            _log(ERROR, "asgi: app returned without sending a response: answered 500", method=str(scope.get("method")), target=_target(scope))
            chan.done(None)
        elif not chan.complete:
            # the final http.response.body never came: the client sees a
            # 500 if no body byte was sent (Go has held the head), else the
            # connection cut (uvicorn: "ASGI callable returned without
            # completing response")
            scope = cycle.scope
            _log(
                ERROR,
                "asgi: app returned without completing the response: answered 500, or the connection is cut if any of it was sent",
                method=str(scope.get("method")),
                target=_target(scope),
            )
            chan.done("error")
        else:
            chan.done(None)
    finally:
        if bound is not None:
            _unbind(bound)


async def _busy(chan):
    # Every thread of the HTTP pool busy and --queue-size requests bound
    # besides: 503 before the app runs, as a full WSGI queue answers.
    await chan({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"1")]})
    await chan({"type": "http.response.body", "body": b"503 Service Unavailable: the sync-work queue is full\n"})
    chan.done(None)


# WSCycle states
WS_CONNECTING, WS_ACCEPTED, WS_CLOSED, WS_RESPONSE, WS_DENIED = range(5)
WS_TEXT, WS_BINARY = 1, 2  # record kinds (internal/asgi/asgi.h)
WS_STOP_GRACE = 1.0  # seconds; see WSCycle._ended


class WSCycle(_DrainWait):
    """One WebSocket: the receive and send callables the app gets (ASGI
    WebSocket 2.5). Messages from the client arrive as ready-made
    websocket.receive dicts; Go stops reading the socket while --ws-max-queue
    of them wait here, so receive() reports each one it returns
    (chan.ws_consumed, no syscall)."""

    __slots__ = ("chan", "scope", "loop", "fresh", "messages", "state", "closed", "waiter", "drain_waiter",
                 "closed_at", "told", "read_since_close")

    def __init__(self, chan, scope, loop):
        self.chan = chan
        self.scope = scope
        self.loop = loop
        self.fresh = True  # websocket.connect not received yet
        # The queue is made only when a message must wait: most go straight
        # to a waiting receive(), and an empty deque costs 600 bytes.
        self.messages = None
        self.state = WS_CONNECTING
        self.closed = None  # the websocket.disconnect message, once the connection ended
        self.closed_at = 0.0  # loop.time() when closed was set
        self.told = False  # receive() has returned closed
        self.read_since_close = False  # receive() has returned a message since closed was set
        self.waiter = None
        self.drain_waiter = None

    # ASGI WebSocket, "Connect", "Receive" and "Disconnect" receive events
    async def receive(self):
        if self.fresh:
            self.fresh = False
            return {"type": "websocket.connect"}
        if self.messages:
            msg = self.messages.popleft()
        elif self.closed is not None:
            self.told = True
            return self.closed
        else:
            fut = self.loop.create_future()
            self.waiter = fut
            try:
                msg = await fut
            except asyncio.CancelledError:
                # A receive() that is cancelled consumes nothing.
                if fut.done() and not fut.cancelled():
                    if self.messages is None:
                        self.messages = collections.deque()
                    self.messages.appendleft(fut.result())
                raise
            finally:
                if self.waiter is fut:
                    self.waiter = None
        if msg["type"] == "websocket.receive":
            self.chan.ws_consumed()
            if self.closed is not None:
                self.read_since_close = True
        else:
            self.told = True
        return msg

    def _deliver(self, message):
        w = self.waiter
        if w is not None and not w.done():
            self.waiter = None
            w.set_result(message)
        else:
            if self.messages is None:
                self.messages = collections.deque()
            self.messages.append(message)

    def _ended(self):
        """Whether send() raises: the connection has ended — except at a
        server stop (1012) while the app reads its way to its
        websocket.disconnect. Go delivers what the client sent before its
        close frame, then the disconnect; an app that answers each message
        must not be stopped by its own send() before it has read them all
        (issue 29), so until receive() has returned the disconnect, send()
        does not raise as long as the app has read a message since the stop
        reached it, or for WS_STOP_GRACE seconds after. What it sends then
        is dropped: the close frame is out. An app that only sends learns
        of the stop from send() within WS_STOP_GRACE. Other ends raise at
        once: an app that never reads a client that left would send on."""
        c = self.closed
        if c is None:
            return False
        if c["code"] != 1012 or self.told:
            return True
        return not (self.read_since_close or self.loop.time() - self.closed_at < WS_STOP_GRACE)

    def _on_close(self, message):
        if self.closed is not None:
            return
        self.closed = message
        self.closed_at = self.loop.time()
        self._deliver(message)
        dw = self.drain_waiter
        if dw is not None and not dw.done():
            if self._ended():
                dw.set_exception(ClientDisconnected("the client disconnected"))
            else:
                dw.set_result(None)  # a stop: the app reads on (_ended)

    # ASGI WebSocket, "Accept", "Send" and "Close" send events, and the
    # "WebSocket Denial Response" extension
    async def send(self, message):
        kind = message["type"]
        state = self.state
        if kind == "websocket.send":
            if self._ended():
                raise ClientDisconnected("the client disconnected")
            if state != WS_ACCEPTED:
                raise RuntimeError("ASGI: 'websocket.send' %s" % _ws_state_text(state))
            text = message.get("text")
            data = message.get("bytes")
            if (text is None) == (data is None):  # "Exactly one of bytes or text must be non-None"
                raise ValueError("ASGI: 'websocket.send' needs exactly one of 'bytes' and 'text'")
            if text is not None:
                wait = self.chan.ws_send(WS_TEXT, text)
            else:
                wait = self.chan.ws_send(WS_BINARY, data)
            if wait:
                await self._drain_wait()
        elif kind == "websocket.accept":
            if self.closed is not None:
                raise ClientDisconnected("the client disconnected")
            if state != WS_CONNECTING:
                raise RuntimeError("ASGI: 'websocket.accept' %s" % _ws_state_text(state))
            headers = message.get("headers") or ()
            subprotocol = message.get("subprotocol")
            if subprotocol is not None:
                if not isinstance(subprotocol, str):
                    raise TypeError("ASGI: 'websocket.accept' 'subprotocol' must be str or None")
                _ws_check_subprotocol(self.scope, subprotocol, headers)
                headers = [*headers, (b"sec-websocket-protocol", subprotocol.encode("latin-1"))]
            self.chan.start(101, headers, True)
            self.state = WS_ACCEPTED
        elif kind == "websocket.close":
            if state == WS_CONNECTING:
                # "sent before the socket is accepted, the server must close
                # the connection with a HTTP 403 error code"
                self.chan.start(403, ())
                self.chan.body(b"", False)
                self.state = WS_DENIED
            elif state == WS_ACCEPTED:
                if self._ended():
                    raise ClientDisconnected("the client disconnected")
                code = message.get("code")
                reason = message.get("reason")
                self.chan.ws_close(1000 if code is None else code, reason or "")
                self.state = WS_CLOSED
            elif state != WS_CLOSED:  # a second close is harmless
                raise RuntimeError("ASGI: 'websocket.close' %s" % _ws_state_text(state))
        elif kind == "websocket.http.response.start":
            if state != WS_CONNECTING:
                raise RuntimeError("ASGI: 'websocket.http.response.start' %s" % _ws_state_text(state))
            self.chan.start(message["status"], message.get("headers", ()))
            self.state = WS_RESPONSE
        elif kind == "websocket.http.response.body":
            if state != WS_RESPONSE:
                raise RuntimeError("ASGI: 'websocket.http.response.body' %s" % _ws_state_text(state))
            more = message.get("more_body", False)
            if not more:
                self.state = WS_DENIED
            if self.chan.body(message.get("body", b""), more):
                await self._drain_wait()
        else:
            raise ValueError(f"ASGI: unexpected message type {kind!r} on a WebSocket connection")


def _ws_check_subprotocol(scope, subprotocol, headers):
    """RFC 6455 section 4.2.2: the server selects one of the subprotocols
    the client offered, or none. Another one raises here and the handshake
    is not answered with it (an app that lets this propagate gets a 500).
    A sec-websocket-protocol header set by hand is checked by Go."""
    offered = scope.get("subprotocols") or ()
    if subprotocol not in offered:
        raise ValueError(
            "ASGI: 'websocket.accept' 'subprotocol' %r was not offered by the client (offered: %s)"
            % (subprotocol, ", ".join(offered) or "none")
        )
    for h in headers:  # malformed entries are Channel.start's to refuse
        if isinstance(h, (tuple, list)) and h and isinstance(h[0], bytes) and h[0].lower() == b"sec-websocket-protocol":
            raise ValueError("ASGI: 'websocket.accept' has both 'subprotocol' and a sec-websocket-protocol header")


def _ws_state_text(state):
    return (
        "before 'websocket.accept'",
        "after 'websocket.accept'",
        "after 'websocket.close'",
        "after 'websocket.http.response.start'",
        "after the handshake was refused",
    )[state]


async def _run_ws(app, cycle):
    _ws_tag.set(cycle.chan.tag)  # the task's own context: nothing to reset
    bound = _bind(SESSION_POOL, cycle.chan.tag, app) if "asgiref.sync" in _modules else None
    if bound == -1:
        bound = None
    try:
        await app(cycle.scope, cycle.receive, cycle.send)
    except BaseException as exc:  # noqa: B902 - reported, never raised into the loop
        if cycle.closed is not None and (
            _from_disconnect(exc)
            # frameworks turn ClientDisconnected into their own exception
            or type(exc).__name__ == "WebSocketDisconnect"
        ):
            cycle.chan.done(None)  # the client left: not an app error
        else:
            # a WebSocket is opened by a GET (RFC 6455 §4.1; RFC 8441's
            # CONNECT over HTTP/2 is not served)
            _app_raised("asgi: WebSocket app raised", cycle.scope, exc, method="GET")
            cycle.chan.done("error")
    else:
        cycle.chan.done(None)
    finally:
        if bound is not None:
            _unbind(bound)


class Lifespan:
    """ASGI Lifespan 2.0: startup before the first request, shutdown at stop."""

    def __init__(self, app, mode, loop):
        self.app = app
        self.mode = mode
        self.loop = loop
        self.state = {}
        self.inbox = asyncio.Queue()
        self.startup_result = loop.create_future()
        self.shutdown_result = loop.create_future()
        self.supported = True
        self.shutting = False  # lifespan.shutdown was sent
        self.task = None

    async def receive(self):
        return await self.inbox.get()

    async def send(self, message):
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            _set(self.startup_result, (True, ""))
        elif kind == "lifespan.startup.failed":
            _set(self.startup_result, (False, str(message.get("message", ""))))
        elif kind == "lifespan.shutdown.complete":
            _set(self.shutdown_result, (True, ""))
        elif kind == "lifespan.shutdown.failed":
            _set(self.shutdown_result, (False, str(message.get("message", ""))))
        else:
            raise ValueError(f"ASGI: unexpected message type {kind!r} on the lifespan scope")

    async def main(self):
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self.receive, self.send)
        except BaseException as exc:  # noqa: B902
            if not self.startup_result.done():
                if self.mode == "auto":
                    # ASGI Lifespan: an app that raises here does not
                    # support lifespan; the server goes on without it.
                    self.supported = False
                    _log(INFO, "ASGI lifespan: the app raised %s on the lifespan scope; continuing without lifespan (--lifespan off silences this)" % type(exc).__name__)
                    _log(DEBUG, "asgi: lifespan: the app raised", traceback=_traceback(exc))
                    _set(self.startup_result, (True, ""))
                else:
                    _set(self.startup_result, (False, _traceback(exc)))
            elif not self.startup_result.result()[0] or (
                self.shutdown_result.done() and not self.shutdown_result.result()[0]
            ):
                # The app said lifespan.startup.failed (or shutdown.failed)
                # and raised as Starlette does: its message is the report,
                # logged once (uvicorn does the same).
                pass
            else:
                when = "during shutdown" if self.shutting else "after startup completed"
                _log(ERROR, "asgi: lifespan: the app raised %s" % when, traceback=_traceback(exc))
        finally:
            if not self.startup_result.done():
                if self.mode == "auto":
                    self.supported = False
                    _set(self.startup_result, (True, ""))
                else:
                    _set(self.startup_result, (False, "the app returned from the lifespan scope without completing startup"))
            _set(self.shutdown_result, (True, ""))

    async def startup(self):
        self.task = self.loop.create_task(self.main())
        await self.inbox.put({"type": "lifespan.startup"})
        return await self.startup_result

    async def shutdown(self, timeout):
        if self.task is None or self.task.done() or not self.supported:
            return
        self.shutting = True
        await self.inbox.put({"type": "lifespan.shutdown"})
        try:
            ok, message = await asyncio.wait_for(asyncio.shield(self.shutdown_result), timeout)
        except asyncio.TimeoutError:
            _log(WARNING, "ASGI lifespan: shutdown did not complete within %gs" % timeout)
            return
        if not ok:
            _log(ERROR, "ASGI lifespan: shutdown failed: " + message)


# ---- sync work on turnstile's pools (internal/asgi/call.c) -----------------
#
# docs/design.md, "Sync work of async apps". asgiref runs a thread-sensitive
# sync_to_async call on the executor SyncToAsync.context_to_thread_executor
# maps the contextvar SyncToAsync.thread_sensitive_context to (asgiref
# 3.13 sync.py:457-546). Before the app runs, a connection's task sets that
# contextvar to the key of one pool thread: a WebSocket session the
# least-loaded thread of the session pool (ts-sess-N) for its whole life, an
# HTTP request one of the HTTP pool (ts-http-N). Django's
# ThreadSensitiveContext keeps a value set first (sync.py:170-174), so its
# thread per request is not started; Channels' consumers and
# database_sync_to_async run every call of a session on its thread, in the
# order made. Lifespan, and apps that never import asgiref, bind nothing.

HTTP_POOL, SESSION_POOL = 0, 1
_modules = sys.modules
_conn_tag = contextvars.ContextVar("turnstile_conn_tag", default=0)  # the Channel's tag: slot << 32 | gen
# A WebSocket session's tag, set for its whole task: turnstile.channels'
# new_channel links the channel it makes there to the socket (fan-out).
_ws_tag = contextvars.ContextVar("turnstile_ws_tag", default=0)
_tl = threading.local()  # per loop thread: the loop and its bridge (run)


class _ThreadKey:
    """asgiref's key for one pool thread (a thread_sensitive_context
    value), kept for the process's life: its executor never changes."""

    __slots__ = ("pool", "index", "__weakref__")
    _exited = False  # read by asgiref 3.11+ on every call (sync.py:517)

    def __init__(self, pool, index):
        self.pool = pool
        self.index = index

    def __repr__(self):
        return "<turnstile pool thread %s-%d>" % (("ts-http", "ts-sess")[self.pool], self.index)


class PoolThreadExecutor(concurrent.futures.Executor):
    """The executor asgiref finds for a _ThreadKey: every call runs on
    that one pool thread, in submission order (its lane, lanes.c).

    From the loop thread (asgiref's run_in_executor) the future is the
    loop's own asyncio future, completed by the loop's drain (CALL_DONE):
    asyncio.wrap_future passes it through. From anywhere else it is a
    concurrent.futures.Future the pool thread completes."""

    __slots__ = ("pool", "index")

    def __init__(self, pool, index):
        self.pool = pool
        self.index = index

    def submit(self, fn, /, *args, **kwargs):
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        loop = asyncio._get_running_loop()
        bridge = getattr(_tl, "bridge", None)
        if bridge is not None and loop is _tl.loop:
            fut = loop.create_future()
        else:
            fut = concurrent.futures.Future()
            bridge = None
        _bridge.call_submit(self.pool, self.index, fut, fn, _conn_tag.get(), bridge)  # RuntimeError when full
        return fut

    def shutdown(self, wait=True, *, cancel_futures=False):
        pass  # Go stops the pools, after the loop


_binding = None  # None: not looked at yet; False: no binding; else (var, keys per pool)


_binding_lock = threading.Lock()  # the loops (--loops) may look at once; free-threaded CPython runs them in parallel


def _binder():
    with _binding_lock:
        return _binding if _binding is not None else _make_binding()


def _make_binding():
    global _binding
    try:
        from asgiref.sync import SyncToAsync

        var = SyncToAsync.thread_sensitive_context
        table = SyncToAsync.context_to_thread_executor
    except (ImportError, AttributeError) as exc:
        _log(WARNING, "turnstile: this asgiref has no thread_sensitive_context (%s): sync work stays on asgiref's threads" % exc)
        _binding = False
        return _binding
    keys = ([], [])
    for which in (HTTP_POOL, SESSION_POOL):
        for i in range(_bridge.pool_threads(which)):
            key = _ThreadKey(which, i)
            table[key] = PoolThreadExecutor(which, i)  # a WeakKeyDictionary: keys holds the key
            keys[which].append(key)
    _binding = (var, keys)
    return _binding


def _bind(which, tag, app):
    """Bind this connection's task to a thread of pool which: (which,
    index, tokens), None when nothing is bound, -1 when the HTTP pool is
    full (503)."""
    b = _binding
    if b is None:
        b = _binder()
    if not b or not b[1][which]:
        return None
    var = b[0]
    if var.get(None) is not None or ("djust" in _modules and _djust_owns(which, app)):
        return None
    i = _bridge.pool_bind(which, tag)
    if i < 0:
        return -1
    return (which, i, var.set(b[1][which][i]), _conn_tag.set(tag), tag)


def _unbind(bound):
    which, i, token, tag_token, tag = bound
    try:
        _binding[0].reset(token)
        _conn_tag.reset(tag_token)
    except ValueError:
        pass  # the app's task switched contexts: nothing to restore
    _bridge.pool_release(which, i, tag)


_djust_state = {}  # which -> True (djust runs its own pool) / False


def _djust_owns(which, app):
    """djust 1.3 with its own pool: LIVEVIEW_CONFIG["worker_threads"] for
    WebSocket sessions, a PooledHTTP of size > 0 in the app (found by
    walking application_mapping, .app, .inner, .application) for HTTP.
    turnstile then steps aside and djust picks its executors. Decided once
    per pool kind (one INFO line)."""
    owns = _djust_state.get(which)
    if owns is not None:
        return owns
    owns = False
    try:
        import djust.worker_pool as wp
    except ImportError:
        wp = None  # djust before 1.3: no pool of its own
    if wp is not None:
        try:
            if which == SESSION_POOL:
                owns = (getattr(wp, "configured_pool_size", lambda: 0)() or 0) > 0
            elif hasattr(wp, "PooledHTTP"):
                # worker_threads alone leaves djust's HTTP requests stock:
                # only a PooledHTTP in the app (threads=None follows
                # worker_threads) takes them
                owns = _find_pooled_http(app, wp.PooledHTTP, 0)
        except Exception as exc:  # noqa: BLE001 - djust's internals: bind as usual
            _log(WARNING, "turnstile: cannot read djust's pool settings (%s): binding sync work as usual" % exc)
            owns = False
        if owns:
            _log(INFO, "turnstile: djust runs its own worker pool for %s: turnstile's %s pool steps aside"
                 % (("HTTP requests", "WebSocket sessions")[which], ("ts-http", "ts-sess")[which]))
    _djust_state[which] = owns
    return owns


def _find_pooled_http(app, cls, depth):
    if depth > 6 or app is None:
        return False
    if isinstance(app, cls):
        size = getattr(app, "_size", None)  # djust 1.3: resolves threads (None: worker_threads)
        return bool(size is not None and size() > 0)
    inner = []
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict):
        inner.extend(mapping.values())
    for name in ("inner", "app", "application"):
        v = getattr(app, name, None)
        if v is not None and v is not app:
            inner.append(v)
    return any(_find_pooled_http(a, cls, depth + 1) for a in inner)


def _set(fut, value):
    if not fut.done():
        fut.set_result(value)


class ParkedExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loops' default executor (run_in_executor(None), asyncio.to_thread),
    one per worker however many loops it runs (_executor_acquire).

    A bounded pool of threads started with the first loop that park on a queue
    when idle instead of exiting, so a submit never starts a thread on the
    loop. Each callable runs in a fresh, empty contextvars.Context; a
    callable that carries its own context (asyncio.to_thread wraps the
    caller's in ctx.run) switches to it, so a task runs in the context it
    carries and nothing else.
    """

    def __init__(self, threads):
        # asyncio wants a ThreadPoolExecutor instance; none of its own
        # machinery (threads started on submit) is used.
        super().__init__(max_workers=threads, thread_name_prefix="ts-exec")
        self._queue = queue.SimpleQueue()
        self._threads = []
        self._ts_shutdown = False
        for i in range(threads):
            t = threading.Thread(target=self._work, name="ts-exec-%d" % i, daemon=True)
            t.start()
            self._threads.append(t)

    def submit(self, fn, /, *args, **kwargs):
        if self._ts_shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        f = concurrent.futures.Future()
        self._queue.put((f, fn, args, kwargs))
        return f

    def _work(self):
        _bridge.set_thread_name(threading.current_thread().name)  # ts-exec-N in top -H, not ts-loop-0
        while True:
            item = self._queue.get()
            if item is None:
                return
            f, fn, args, kwargs = item
            if not f.set_running_or_notify_cancel():
                continue
            try:
                result = contextvars.Context().run(fn, *args, **kwargs)
            except BaseException as exc:  # noqa: B902
                f.set_exception(exc)
            else:
                f.set_result(result)

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._ts_shutdown = True
        for _ in self._threads:
            self._queue.put(None)


# The parked executor is the worker's, shared by its loops (--loops): made
# by the first loop that starts, with --executor-threads threads, and shut
# down when the last loop using it stops. A loop's run_in_executor(None)
# gets a concurrent.futures.Future, which asyncio.wrap_future completes on
# that loop (call_soon_threadsafe), so any loop may use any thread.
_executor = None
_executor_users = 0
_executor_lock = threading.Lock()


def _executor_acquire(threads):
    global _executor, _executor_users
    with _executor_lock:
        if _executor is None:
            _executor = ParkedExecutor(threads)
        _executor_users += 1
        return _executor


def _executor_release():
    global _executor, _executor_users
    with _executor_lock:
        _executor_users -= 1
        if _executor_users == 0 and _executor is not None:
            _executor.shutdown()
            _executor = None


def _new_loop(kind):
    if kind in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if kind == "uvloop":
                raise RuntimeError("--loop uvloop: uvloop is not installed in this environment") from None
        else:
            return uvloop.new_event_loop(), "uvloop"
    return asyncio.new_event_loop(), "asyncio"


def run(bridge, app, lifespan_mode, loop_kind, executor_threads, write_buffer, index=0):
    """Run the loop until a STOP event; called by loop.c on ts-loop-N.

    bridge is the loop's LoopBridge (loop.c): its queue (drain, fd), the
    end of its lifespan startup (started) and its lifespan state. index is
    the loop's number: the thread is ts-loop-<index> for threading too."""
    threading.current_thread().name = "ts-loop-%d" % index
    _bridge.http_setup(ClientDisconnected)
    bridge_drain = bridge.drain
    loop, loop_name = _new_loop(loop_kind)
    asyncio.set_event_loop(loop)
    _tl.loop, _tl.bridge = loop, bridge  # PoolThreadExecutor completes this loop's futures here
    executor = _executor_acquire(executor_threads)
    loop.set_default_executor(executor)
    stopping = []

    def drain():
        for ev in bridge_drain():
            kind = ev[0]
            if kind == CALL_DONE:
                fut = ev[1]
                if not fut.done():  # cancelled meanwhile: asgiref awaits it no more
                    if ev[2]:
                        fut.set_result(ev[3])
                    elif isinstance(ev[3], StopIteration):  # a future refuses it (PEP 479)
                        fut.set_exception(RuntimeError("sync call raised StopIteration"))
                    else:
                        fut.set_exception(ev[3])
            elif kind == NEW:
                chan = ev[1]
                cycle = HTTPCycle(chan, ev[2], ev[3], ev[4], loop)
                chan.bind(cycle)
                start_task(_run_http(app, cycle))
            elif kind == BODY:
                ev[1]._on_body(ev[2], ev[3])
            elif kind == DISCONNECT:
                ev[1]._on_disconnect()
            elif kind == DRAINED:
                ev[1]._on_drained()
            elif kind == WS_MSG or kind == WS_CLOSE:
                cycle = ev[1]
                if kind == WS_MSG:
                    cycle._deliver(ev[2])
                else:
                    cycle._on_close(ev[2])
            elif kind == WS_NEW:
                chan = ev[1]
                cycle = WSCycle(chan, ev[2], loop)
                chan.bind(cycle)
                task = start_task(_run_ws(app, cycle))
                ws_tasks.add(task)
                task.add_done_callback(ws_tasks.discard)
            elif kind == STOP and not stopping:
                stopping.append(True)
                loop.create_task(stop(ev[1]))

    # Python 3.12+: start each request's task eagerly, so an app that
    # answers without awaiting anything runs to the end inside the drain
    # callback, with no trip through the loop's ready queue. The task
    # exists from the start (asyncio.current_task() works, as anyio needs).
    if sys.version_info >= (3, 12):
        Task = asyncio.Task

        def start_task(coro):
            return Task(coro, loop=loop, eager_start=True)
    else:
        start_task = loop.create_task

    lifespan = Lifespan(app, lifespan_mode, loop)
    ws_tasks = set()  # the WebSocket apps running

    async def stop(ws_wait):
        # Go has closed every WebSocket (1012) and delivered
        # websocket.disconnect: their apps get ws_wait seconds to return
        # (their finally blocks run), then they are cancelled (case B29).
        live = [t for t in ws_tasks if not t.done()]
        if live:
            _, pending = await asyncio.wait(live, timeout=ws_wait)
            if pending:
                _log(WARNING, "%d WebSocket app(s) still running at the graceful timeout: cancelled" % len(pending))
                for t in pending:
                    t.cancel()
                await asyncio.wait(pending, timeout=0.25)
        if lifespan_mode != "off":
            await lifespan.shutdown(30.0)
        loop.stop()

    loop.add_reader(bridge.fd(), drain)

    # The watchdog's heartbeat is written by drain() itself; the Go
    # watchdog pushes a probe event every 50 ms so an idle loop turns too
    # (a call_later timer on the loop cost 4 % CPU per request).
    _log(DEBUG, "event loop: %s" % loop_name)
    if lifespan_mode != "off":
        ok, message = loop.run_until_complete(lifespan.startup())
        if not ok:
            bridge.started(False, message or "lifespan startup failed")
            _executor_release()
            return
        if lifespan.supported:
            bridge.set_state(lifespan.state)
    bridge.started(True, loop_name)
    try:
        loop.run_forever()
    finally:
        _executor_release()
