// Package workerctl is the contract between the master
// (internal/supervise) and a worker (internal/server): what a worker
// inherits when the master starts it (environment variables and file
// descriptors), the messages it writes on its control pipe, and how long a
// stopping worker may take. Both sides use it; neither spells the protocol
// itself. It is pure Go (no cgo), so the master links no Python.
//
// The master starts every worker as a re-exec of its own binary with the
// same arguments, and:
//
//   - EnvWorker=<id> and EnvWorkerAdmin=<path> in its environment (Env);
//     the settings the master read from its environment and --config
//     file travel in internal/cliconf's EnvSettings;
//   - the shared listening socket as ListenerFD and the write end of the
//     control pipe as ControlFD (ExtraFiles); under --http3, its slot's
//     UDP socket as QUICFD; its end of the channel layer's relay
//     socketpair as LayerFD (internal/chlayer, relay.go);
//   - stdout and stderr on a pipe the master forwards to its log.
//
// The worker writes one Msg per line on ControlFD (Encode); the master
// reads lines of at most MaxLineBytes and parses each (Parse):
//
//	ready                  the app is loaded and the worker accepts
//	failed <reason>        start-up failed; the worker is exiting
//	recycle <cause> <why>  replace me gracefully (cause: max-requests, timeout)
package workerctl

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Environment variables the master sets in a worker's environment. A
// worker takes both out of its environment at start (internal/server),
// before Python copies it into os.environ.
const (
	// EnvWorker holds the worker's id, "1".."N". It is set only in
	// workers: cmd/turnstile runs the worker when it is present and the
	// master otherwise.
	EnvWorker = "TURNSTILE_WORKER"
	// EnvWorkerAdmin is the Unix socket path the worker serves its admin
	// handler on (the master scrapes /metrics and /readyz there), or
	// empty when the admin listener is off.
	EnvWorkerAdmin = "TURNSTILE_WORKER_ADMIN"
)

// File descriptors a worker inherits from the master (ExtraFiles puts
// them there). The worker marks both close-on-exec at start, so that
// processes the app starts do not inherit them.
const (
	// ListenerFD is the inherited listening socket every worker accepts
	// on: one accept queue shared by all workers.
	ListenerFD = 3
	// ControlFD is the write end of the worker's control pipe to the
	// master: one Msg per line.
	ControlFD = 4
	// QUICFD is the UDP socket the worker serves HTTP/3 on, under
	// --http3 only: the one of its worker slot (id) in a reuseport group
	// of one socket per slot, all bound by the master to the TLS port
	// (listen.BindUDP). The kernel hashes a datagram's addresses and
	// ports to one socket of the group, so every datagram of one QUIC
	// connection reaches the same slot (as long as the client's address
	// does not change), and a respawned or replacing worker of that slot
	// takes over its socket, and the group never changes under the
	// connections of the other slots.
	QUICFD = 5
	// LayerFD is the worker's end of a Unix stream socketpair to the
	// master: the channel layer's relay across the workers of one host
	// (internal/chlayer, relay.go). Always passed; a worker uses it under
	// --workers 2 or more.
	LayerFD = 6
)

// StopGrace is how long past --graceful-timeout a stopping worker still
// waits for what runs the app: the pool's Python threads (WSGI), or the
// event loop cancelling the app's tasks and running lifespan shutdown
// (ASGI, asgi.StopMargin). Then it runs atexit handlers and exits, or,
// when a thread or the loop is still busy (a request that outlived the
// graceful timeout: a Python thread cannot be stopped), exits without
// them. The master kills a stopping worker only after StopGrace and a
// margin for the exit (internal/supervise killGrace), so that its kill is
// a backstop for a worker that cannot exit, never a race with one that
// is exiting.
const StopGrace = time.Second

// MaxLineBytes bounds one control line, its newline included: Encode
// shortens a longer reason to fit, and the master reads no longer line.
const MaxLineBytes = 64 << 10

// Env returns the variables that make a process worker id (1..N) of a
// master, with its admin socket at admin ("" when the admin listener is
// off), as KEY=VALUE strings for exec.Cmd.Env.
func Env(id int, admin string) []string {
	return []string{EnvWorker + "=" + strconv.Itoa(id), EnvWorkerAdmin + "=" + admin}
}

// IsEnv reports whether kv (KEY=VALUE, as in os.Environ) sets one of the
// variables Env sets: the master drops these from its own environment
// before it adds a worker's.
func IsEnv(kv string) bool {
	return strings.HasPrefix(kv, EnvWorker+"=") || strings.HasPrefix(kv, EnvWorkerAdmin+"=")
}

// ExtraFiles returns the files a worker inherits, for exec.Cmd.ExtraFiles
// (whose entry i becomes fd 3+i): listener as ListenerFD and control (the
// control pipe's write end) as ControlFD, quic (nil: none, no --http3) as
// QUICFD and layer (nil: none) as LayerFD.
func ExtraFiles(listener, control, quic, layer *os.File) []*os.File {
	files := make([]*os.File, max(ListenerFD, ControlFD)-2)
	files[ListenerFD-3] = listener
	files[ControlFD-3] = control
	if quic != nil || layer != nil {
		files = append(files, quic) // QUICFD (a nil entry: closed in the worker)
	}
	if layer != nil {
		files = append(files, layer) // LayerFD
	}
	return files
}

// Kind is what a control message says: its first word on the line.
type Kind int

const (
	// Ready: the app is loaded and the worker accepts. Sent once.
	Ready Kind = iota + 1
	// Failed: start-up failed and the worker is exiting; Reason says why
	// (the last error it logged, in one line).
	Failed
	// Recycle: the worker asks, once, to be replaced gracefully; Cause
	// (CauseMaxRequests, CauseTimeout) says why, Reason the detail.
	Recycle
)

// words are the Kinds as they are written on the line.
var words = [...]string{Ready: "ready", Failed: "failed", Recycle: "recycle"}

func (k Kind) String() string {
	if k < Ready || k > Recycle {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return words[k]
}

// Causes a worker gives with Recycle.
const (
	// CauseMaxRequests: the worker served --max-requests (plus its
	// jitter) requests.
	CauseMaxRequests = "max-requests"
	// CauseTimeout: a request ran, or the event loop did not turn, for
	// longer than --timeout.
	CauseTimeout = "timeout"
)

// Msg is one control message from a worker to the master.
type Msg struct {
	Kind Kind
	// Cause is Recycle's cause, one word (CauseMaxRequests,
	// CauseTimeout); empty for the other kinds.
	Cause string
	// Reason is Failed's reason or Recycle's detail ("1000 requests
	// served"), one line: Encode turns newlines into spaces. Empty for
	// Ready.
	Reason string
}

// Errors returned by Encode and Parse.
var (
	// ErrKind: Encode got a Kind it does not know; Parse a line whose
	// first word is none of ready, failed, recycle.
	ErrKind = errors.New("workerctl: unknown message kind")
	// ErrCause: a Recycle message without a cause, or (Encode) with a
	// cause that is not one word.
	ErrCause = errors.New("workerctl: recycle without a one-word cause")
	// ErrField: a field the kind does not carry (Encode: a Ready with a
	// reason, a Failed with a cause; Parse: "ready" with more words).
	ErrField = errors.New("workerctl: field not used by the message kind")
)

// Encode returns m as one control line, "\n" included: its kind's word,
// then Recycle's Cause, then the Reason with surrounding space trimmed and
// each newline replaced by a space, shortened (at a character boundary)
// so the line fits MaxLineBytes. It returns ErrKind, ErrCause or ErrField
// for a message Parse could not read back.
func (m Msg) Encode() ([]byte, error) {
	if m.Kind < Ready || m.Kind > Recycle {
		return nil, ErrKind
	}
	if m.Kind == Recycle {
		if m.Cause == "" || strings.ContainsAny(m.Cause, " \t\r\n") {
			return nil, ErrCause
		}
	} else if m.Cause != "" {
		return nil, ErrField
	}
	reason := strings.ReplaceAll(strings.TrimSpace(m.Reason), "\n", " ")
	if m.Kind == Ready && reason != "" {
		return nil, ErrField
	}
	b := make([]byte, 0, len(words[m.Kind])+len(m.Cause)+len(reason)+3)
	b = append(b, words[m.Kind]...)
	if m.Cause != "" {
		b = append(b, ' ')
		b = append(b, m.Cause...)
	}
	if reason != "" {
		b = append(b, ' ')
		if room := MaxLineBytes - 1 - len(b); len(reason) > room {
			for room > 0 && !utf8.RuneStart(reason[room]) {
				room-- // not in the middle of a character
			}
			reason = reason[:room]
		}
		b = append(b, reason...)
	}
	return append(b, '\n'), nil
}

// Parse reads one control line, without its newline, as Encode writes it.
// It returns ErrKind for an unknown first word, ErrCause for a recycle
// line without a cause, and ErrField for "ready" followed by more.
func Parse(line string) (Msg, error) {
	word, rest, more := strings.Cut(line, " ")
	switch word {
	case words[Ready]:
		if more {
			return Msg{}, ErrField
		}
		return Msg{Kind: Ready}, nil
	case words[Failed]:
		return Msg{Kind: Failed, Reason: rest}, nil
	case words[Recycle]:
		cause, why, _ := strings.Cut(rest, " ")
		if cause == "" {
			return Msg{}, ErrCause
		}
		return Msg{Kind: Recycle, Cause: cause, Reason: why}, nil
	}
	return Msg{}, ErrKind
}
