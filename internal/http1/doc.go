// Package http1 is turnstile's own strict HTTP/1.1 connection layer
// (RFC 9112, RFC 9110). It replaces net/http for plain HTTP/1.1 because
// net/http is lenient where a server behind a proxy must not be (DESIGN.md,
// "The bytes rule"): it serves Content-Length + Transfer-Encoding smuggles,
// accepts bare LF, answers 501 where 400 is due and never sends 414.
// Framing in doubt is answered with exactly one response and a close.
//
// Handlers get raw byte slices (no maps, no strings) so that the Python
// bridge can build its objects in one pass, and the hot path — a keep-alive
// GET answered with a small body — does no heap allocation after warm-up:
// the Request, Body, ResponseWriter and head buffer live in the per-conn
// struct and the bufio.Reader/Writer come from sync.Pools.
//
// # Life of a request
//
//  1. Serve accepts the connection; HeaderTimeout starts (conn.serve). The
//     connection is "idle" until its first byte arrives; later requests wait
//     at most KeepAliveTimeout for their first byte, then HeaderTimeout
//     runs again. Expiry before any byte: silent close; after: 408, close.
//  2. readHead reads the head line by line into the conn's head buffer,
//     enforcing MaxRequestLineBytes (414), MaxHeaderFieldBytes,
//     MaxHeaderFields and MaxHeaderBytes (431) as it reads, and refusing a
//     line not ending in CRLF at once (400). parseHead then validates the
//     request-line, every field, Host, Content-Length, Transfer-Encoding and
//     Connection and fills Request; any error → one response, close.
//  3. serveRequest applies MaxBodyBytes to Content-Length (413), prepares
//     Body (Content-Length or chunked, chunked.go) and counts the request
//     in InFlight; above MaxConcurrency it answers 503 instead of step 4.
//  4. The Handler runs. Body.Read sends 100 Continue on first use when
//     asked for (B22) and arms BodyTimeout before each socket read. The
//     ResponseWriter writes the head (adding Date, Server, framing and
//     Connection) and body into the bufio.Writer; each socket write is
//     bounded by WriteTimeout.
//  5. After the handler: no response → 500 (or 413/408/400 if the body
//     failed); a panic → 500 and close; then the chunked terminator and a
//     flush. A short body, a write error or Connection: close (B21, and
//     every response once Drain or Shutdown began, RFC 9112 §9.6) closes
//     the connection: half-close, brief linger, close.
//  6. An unread body is drained up to 256 KiB, else the connection closes;
//     then the next (pipelined) request is read: back to 1. Pipelined
//     requests are answered in order, each parsed only after the previous
//     response is finished (RFC 9112 §9.3.2).
//
// # Drain
//
// Drain and Shutdown make every response whose head is not yet written
// announce "Connection: close" (RFC 9112 §9.6) and send HTTP/2 connections
// GOAWAY (RFC 9113 §6.8; streams up to its last-stream id are served). A
// connection whose last response left before the drain began never heard
// of it: Shutdown keeps it, idle, for KeepAliveDrain (a lame-duck window
// in which a request arriving on it is served, announcing the close), then
// closes it.
//
// Per kept-alive request the server sets one timer (the keep-alive
// deadline) and, under load, makes one read: the goroutine yields once
// before reading the next request, so the read usually finds it instead
// of failing with EAGAIN; the head's deadline is armed only when the head
// needs a second read, and WriteTimeout only when a write finds the socket
// buffer full (connWriter).
//
// A handler may take the connection over in step 4 with Hijack (WebSocket
// upgrades): steps 5 and 6 are skipped and the server forgets the
// connection at once (hijack.go).
package http1
