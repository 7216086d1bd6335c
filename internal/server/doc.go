// Package server runs one turnstile worker.
//
// Start-up: the admin listener first (/livez answers at once, /readyz is
// 503 until the app is loaded), then the HTTP listener is bound, CPython is
// started and the app imported (python.Start), the pool started (WSGI) or
// the loops and the pools for their sync work (ASGI, syncpools.go), and
// only then are connections accepted. A failure at any step logs one clear
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
// its pool or the ASGI handler on its loops, chosen once by kind; the
// watchdog and the tracker watch the Interface's Loops and Pools.
//
// Beside that chain: TLS certificates from files, re-read in place on
// SIGHUP (certs.go, internal/tlsconf), or from an ACME CA (acme.go,
// internal/acme); HTTP/2 (http2.go, internal/h2) on the same listener,
// HTTP/3 (http3.go, internal/h3) on the UDP socket of the worker's slot;
// the channel layer's store (internal/chlayer), linked to the master's
// relay when the host has several workers (layer.go); the access log
// (access.go, internal/accesslog); the admin handler's /metrics, /readyz
// and /debug/* (metrics.go, status.go, worker.go).
//
// Stop: SIGTERM or SIGINT stops accepting; in-flight requests finish within
// the graceful timeout, each answered with Connection: close; the pool
// stops; atexit handlers and logging.shutdown() run; Run returns ExitOK. A
// second signal exits at once.
package server
