// Package asgi serves ASGI apps (ASGI 3.0: HTTP, WebSocket and Lifespan)
// on asyncio event loops, each a Loop value with its own Python thread.
//
// Life of an ASGI HTTP request:
//
//  1. Handler.ServeHTTP1 (a handler goroutine, no GIL) takes a request
//     slot (handler.go: a C ts_asgi_slot and its Go half, shared by every
//     loop of the process) and writes the request block (internal/reqblock:
//     method, path, headers, client, server, and the body when it has all
//     arrived within MaxPrefetchBytes) into it.
//  2. ts_asgi_begin binds the slot to the loop of the request's
//     connection (Handler.loopFor, handler.go: with several loops, the one
//     pick gave the connection on its first request; --loops) and
//     ts_asgi_push_new sets the request's fields and puts a TS_EV_NEW event
//     on the loop's queue (queue.c; internal/python's wake list writes the
//     eventfd only when the loop sleeps).
//  3. On the loop thread, the queue's add_reader callback drains every
//     event (loop.c), builds the scope in one pass from the block
//     (scope.c) and starts the app's task with a Channel (channel.c) as
//     its send callable (send.c) and a receive that reads the slot's body.
//  4. send() never blocks: the head and body bytes go to the slot's
//     output buffer and the slot is listed on the loop's ready list; the
//     ready list's dispatcher (ready.go, a python.Dispatcher) wakes the handler
//     goroutine, which writes the bytes to the socket (ts_asgi_take,
//     ts_asgi_written) and tells the loop when a full buffer drained.
//  5. When the task ends, the slot is released and reused by the next
//     request; a client that leaves becomes http.disconnect on receive().
//
// A WebSocket (websocket.go, websocket.c) is the same slot with
// TS_EV_WS_NEW: the protocol is internal/websocket's Session, this package
// is its adapter (scope, accept/denial, the websocket.* messages). Lifespan
// runs on each loop before it serves (Loop.Start) and after (StopLoops).
// The watchdog reads each loop's heartbeat and probe lag (watch.go).
//
// Sync work of the app (asgiref's thread-sensitive calls, sync_to_async)
// runs on the worker's pools (internal/python Pool, lanes.c) rather than
// on asgiref's threads: call.c queues each call from the loop thread on a
// pool thread's lane and completes it on the loop's own queue; SetPools
// (pools.go) hands the loops the pools internal/server started.
//
// The channel layer's fan-out (fanout.go) queues a group's frame, framed
// once, on each member's WebSocket session; the session's writer writes
// it without the loop or Python.
//
// The Python side is python/turnstile/_asgi.py, compiled once per process
// and run by each loop thread with its LoopBridge.
package asgi
