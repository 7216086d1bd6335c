package websocket

// Ping/pong keepalive (RFC 6455 §5.5.2, §5.5.3): gorilla answers the
// client's pings; the server's pings are timed here.

import (
	"time"

	gorilla "github.com/gorilla/websocket"
)

// tick is the ping timer: a ping every PingInterval; when PingTimeout is
// set, no pong within it closes the connection with 1011. A reader paused
// on MaxQueue reads no pongs: the client counts as alive then.
func (s *Session) tick() {
	if s.readerDone.Load() || s.closing() {
		return
	}
	cfg := s.cfg
	if sent := s.pingSent.Load(); sent != 0 {
		if s.lastPong.Load() < sent && !s.paused.Load() {
			s.closeNow(CloseInternalServerErr, "keepalive ping timeout")
			s.app.Disconnect(CloseInternalServerErr, "keepalive ping timeout")
			s.raw.Close()
			return
		}
		s.pingSent.Store(0)
		if rest := cfg.PingInterval - cfg.PingTimeout; rest > 0 {
			s.timer.Reset(rest)
			return
		}
	}
	now := time.Now()
	if cfg.PingTimeout > 0 {
		s.pingSent.Store(now.UnixNano())
		s.timer.Reset(cfg.PingTimeout)
	} else {
		s.timer.Reset(cfg.PingInterval)
	}
	s.control(gorilla.PingMessage, nil, now.Add(time.Second))
}

// closeNow is Close for a dead peer: a short write deadline, and no wait
// for the client's answer.
func (s *Session) closeNow(code int, reason string) {
	s.mu.Lock()
	if s.closeSent {
		s.mu.Unlock()
		return
	}
	s.closeSent = true
	close(s.quit)
	s.mu.Unlock()
	s.control(gorilla.CloseMessage, gorilla.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}
