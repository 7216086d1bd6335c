// Package server runs one turnstile worker.
//
// Start-up: the admin listener first (/livez answers at once, /readyz is
// 503 until the app is loaded), then the HTTP listener is bound, CPython is
// started and the app imported (python.Start), the pool started, and only
// then are connections accepted. A failure at any step logs one clear
// record (the app's traceback for an import error) and Run returns
// ExitFailed.
//
// Stop: SIGTERM or SIGINT stops accepting; in-flight requests finish within
// the graceful timeout, each answered with Connection: close; the pool
// stops; atexit handlers and logging.shutdown() run; Run returns ExitOK. A
// second signal exits at once.
package server
