// Package server runs one turnstile worker.
//
// Start-up: the admin listener first (/livez answers at once, /readyz is
// 503 until the app is loaded), then the HTTP listener is bound, CPython is
// started and the app imported (python.Start), the pool started, and only
// then are connections accepted. A failure at any step logs one clear
// record (the app's traceback for an import error) and Run returns
// ExitFailed.
//
// In a worker the master started (inherit.go), the variables, descriptors
// and control messages are internal/workerctl's: the worker reports
// ready, failed or recycle on its control pipe (control.go). Sockets are
// opened by internal/listen and records made by internal/logs, which the
// master shares; nothing here is imported by the master, which links no
// Python.
//
// The chain in front of the app (worker.go, proxy.go): the listener is
// the inherited socket, in a worker wrapped by the accept gate (gate.go),
// then the PROXY protocol reader (--proxy-protocol), then TLS; the handler
// is the forwarding-header wrapper (--proxy-headers, outermost, so every
// layer sees the client a trusted proxy named), the tracker (track.go),
// static mounts, then the app's Interface (iface.go): the WSGI handler on
// its pool or the ASGI handler on its loop, chosen once by kind; the
// watchdog and the tracker watch the Interface's Loops and Pools.
//
// Stop: SIGTERM or SIGINT stops accepting; in-flight requests finish within
// the graceful timeout, each answered with Connection: close; the pool
// stops; atexit handlers and logging.shutdown() run; Run returns ExitOK. A
// second signal exits at once.
package server
