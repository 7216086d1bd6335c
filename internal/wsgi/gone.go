package wsgi

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Withdrawing the queued requests whose clients have gone (issue 29).
//
// A request waits in the C queue until a pool thread takes it; a client
// that gives up meanwhile (a proxy's upstream timeout, a user who pressed
// stop) used to have its request run anyway when a thread reached it, so a
// burst of abandoned requests kept the threads busy long after its clients
// left and delayed every fresh request behind it. Now sweepSlots (watch.go)
// looks at the queued requests every GoneEvery while requests are in
// flight, with one poll(2) over all their sockets (POLLRDHUP, timeout 0),
// and withdraws those whose client has gone with ts_pool_cancel: one short
// cgo call per withdrawn request, O(1), under the lock a thread takes jobs
// under, so a job is either taken or withdrawn, never both. Its handler
// goroutine then closes the connection without a response.
//
// Nothing is added to a request's own path but Presence (a few loads, no
// syscall): no goroutine, no timer and no syscall per request; the sweep
// costs one poll(2) per tick over the queued requests and is idle when
// nothing is in flight. A request a thread already took is not affected:
// it learns of the disconnect at its next write, as PEP 3333 allows.
//
// What counts as gone:
//
//   - a reset or a socket error (POLLERR, POLLHUP), or a socket the server
//     closed (POLLNVAL);
//   - an end of stream (FIN, POLLRDHUP) with nothing of the connection
//     left unread: the client closed, or half-closed after sending its
//     request (shutdown(SHUT_WR)). Like gunicorn, uvicorn and nginx (499),
//     an EOF while the request waits is a client that left;
//   - but not an end of stream after bytes the server has not consumed: a
//     pipelined request, or the rest of this request's body (held by the
//     server when the request was queued, or still in the kernel's receive
//     queue, FIONREAD). A client that sent more work before its FIN
//     expects the answers. On TLS the kernel's count is not looked at (a
//     close_notify alert is bytes too), only what the server holds.
//   - On HTTP/2 the stream's reset (or its connection's end).

// GoneEvery is how often the queued requests are looked at while requests
// are in flight: a request whose client left is withdrawn within about
// this long.
const GoneEvery = 20 * time.Millisecond

// withdrawnTotal counts the requests withdrawn because their client left.
var withdrawnTotal atomic.Int64

// Withdrawn returns how many queued requests were withdrawn, never
// started, because their client had gone (turnstile_requests_withdrawn_total).
func Withdrawn() int64 { return withdrawnTotal.Load() }

// Outcomes of a wait, set by whoever withdrew the job.
const (
	outcomeRan     = 0
	outcomeExpired = 1 // past QueueTimeout: answer 503
	outcomeGone    = 2 // the client left: answer nothing
	outcomeStopped = 3 // the worker stops before a thread could take it: answer 503
)

// wake ends the wait of a slot whose job was withdrawn (it will never
// complete, so the channel's buffer is free).
func (s *slot) wake(outcome int32) {
	s.outcome.Store(outcome)
	select {
	case s.done <- struct{}{}:
	default:
	}
}

// queued reports, racily, whether no thread has taken the slot's job yet
// (a filter only: ts_pool_cancel decides).
func (s *slot) queued() bool {
	b := &s.job.base
	return !(b.started_ns != 0 && b.started_ns >= b.enqueued_ns)
}

// watched is one request the sweep polls.
type watched struct {
	s       *slot
	seq     uint64
	revents int16 // poll's answer; 0 for a stream whose context ended
}

// sweep looks at h's requests in flight: one waiting past QueueTimeout is
// withdrawn and answered 503; one whose client has gone is withdrawn and
// dropped. It returns how many of h's requests are in flight.
func (h *Handler) sweep(now time.Time) int {
	active := 0
	polls, cands := h.polls[:0], h.cands[:0]
	var gone []watched
	registry.mu.Lock()
	for s := range registry.slots {
		if s.h != h {
			continue
		}
		// Under the record's lock the slot cannot finish this request
		// and begin another.
		s.rec.Read(func(_, _ []byte, start time.Time) {
			active++
			if !s.queued() {
				return
			}
			if h.QueueTimeout > 0 && now.Sub(start) >= h.QueueTimeout {
				if s.cancel() {
					s.wake(outcomeExpired)
				}
				return
			}
			if h.stopping.Load() {
				if s.cancel() {
					s.wake(outcomeStopped)
				}
				return
			}
			if s.kept == s.seq {
				return // half-closed with work pending: the client stays
			}
			switch {
			case s.pres.Done != nil:
				select {
				case <-s.pres.Done:
					gone = append(gone, watched{s: s, seq: s.seq})
				default:
				}
			case s.pres.FD >= 0:
				polls = append(polls, unix.PollFd{Fd: int32(s.pres.FD), Events: unix.POLLRDHUP})
				cands = append(cands, watched{s: s, seq: s.seq})
			}
		})
	}
	registry.mu.Unlock()
	if len(polls) > 0 {
		for {
			_, err := unix.Poll(polls, 0)
			if err != unix.EINTR {
				break
			}
		}
		for i, p := range polls {
			if p.Revents != 0 {
				c := cands[i]
				c.revents = p.Revents
				gone = append(gone, c)
			}
		}
	}
	n := 0
	for _, g := range gone {
		s, seq, revents := g.s, g.seq, g.revents
		s.rec.Read(func(method, path []byte, _ time.Time) {
			if s.seq != seq {
				return // the request ended; the slot serves another
			}
			if revents != 0 && !clientLeft(s, revents) {
				s.kept = seq
				return
			}
			if s.cancel() {
				s.wake(outcomeGone)
				n++
				if h.goneLog.count == 0 {
					h.goneLog.example = string(method) + " " + string(path)
				}
				h.goneLog.count++
			}
		})
	}
	if n > 0 {
		withdrawnTotal.Add(int64(n))
	}
	if h.goneLog.count > 0 && now.Sub(h.goneLog.last) >= goneLogEvery {
		h.logger().Info("queued requests withdrawn: their clients left before a thread took them",
			"count", h.goneLog.count, "example", h.goneLog.example)
		h.goneLog.count, h.goneLog.last = 0, now
	}
	// Keep the buffers for the next tick (bounded by the slots that exist).
	clear(cands)
	h.polls, h.cands = polls[:0], cands[:0]
	return active
}

// goneLogEvery bounds the withdrawal summary to one record per period: a
// burst of 2 000 abandoned requests is one line with its count, not 2 000.
const goneLogEvery = time.Second

// clientLeft tells, from poll's revents for the slot's socket, whether its
// client has gone (see the rules above). Called under the slot's record
// lock with the request still the one polled, so the socket is its
// connection's, or a number reused after the server closed that
// connection (the client is gone for this request either way).
func clientLeft(s *slot, revents int16) bool {
	if revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
		return true
	}
	if revents&unix.POLLRDHUP == 0 {
		return false
	}
	if s.pres.Unread {
		return false
	}
	if !s.pres.TLS {
		if n, err := unix.IoctlGetInt(s.pres.FD, unix.SIOCINQ); err == nil && n > 0 {
			s.pres.Pipelined() // and the rest of the batch is kept too
			return false
		}
	}
	return true
}
