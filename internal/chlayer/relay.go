package chlayer

// The layer across the workers of one host (docs/design.md, "Across the
// workers of one host"): each worker keeps its own Store; the master runs a
// Hub; they talk over one Unix stream socketpair per worker
// (workerctl.LayerFD). Frames are length-prefixed:
//
//	u32 LE length of the rest | op u8 | u16 LE len, prefix | u16 LE len, name | data
//
// Worker → master: OpJoin / OpLeave (a group of prefix gained its first /
// lost its last member on this worker), OpGroupSend (prefix, group, data),
// OpSend (prefix, channel of another worker, data), OpGroupFrames (prefix,
// group, kind byte + WebSocket message). Master → worker: OpGroupSend (fan
// out to the local members), OpSend (queue on the local channel),
// OpGroupFrames (write to the local members' sockets). The Hub handles
// frames one at a time under its mutex and
// appends each to its destinations' FIFO queues in that order, so every
// worker sees two group_sends of a group in the same order, its own
// included: a group_send with the relay on is never fanned out locally
// first.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Frame ops.
const (
	OpJoin byte = iota + 1
	OpLeave
	OpGroupSend
	OpSend
	OpGroupFrames // GroupSendFrames: data is frameData's (frames.go)
)

// LinkQueue and LinkBytes bound the frames waiting to be written on one
// link; past either a frame is dropped and counted (a worker that does not
// read cannot make the master, or a sender, grow).
const (
	LinkQueue = 8192
	LinkBytes = 64 << 20
)

// Frame is one message on a link.
type Frame struct {
	Op           byte
	Prefix, Name string
	Data         []byte
}

func (f Frame) encode() []byte {
	n := 1 + 2 + len(f.Prefix) + 2 + len(f.Name) + len(f.Data)
	b := make([]byte, 0, 4+n)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, f.Op)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(f.Prefix)))
	b = append(b, f.Prefix...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(f.Name)))
	b = append(b, f.Name...)
	return append(b, f.Data...)
}

var errFrame = errors.New("chlayer: malformed relay frame")

// readFrame reads one frame; max bounds its length.
func readFrame(r *bufio.Reader, max int) (Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n < 5 || n > max {
		return Frame{}, errFrame
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return Frame{}, err
	}
	f := Frame{Op: b[0]}
	p := 1
	field := func() (string, bool) {
		if p+2 > len(b) {
			return "", false
		}
		l := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+l > len(b) {
			return "", false
		}
		s := string(b[p : p+l])
		p += l
		return s, true
	}
	var ok1, ok2 bool
	f.Prefix, ok1 = field()
	f.Name, ok2 = field()
	if !ok1 || !ok2 {
		return Frame{}, errFrame
	}
	f.Data = b[p:]
	return f, nil
}

// link writes frames to one peer from a bounded queue, batching writes
// while the queue is not empty.
type link struct {
	conn    net.Conn
	q       chan []byte
	queued  atomic.Int64 // bytes in q
	dropped atomic.Uint64
	done    chan struct{}
}

func newLink(c net.Conn) *link {
	l := &link{conn: c, q: make(chan []byte, LinkQueue), done: make(chan struct{})}
	go l.writeLoop()
	return l
}

// reserve counts b's bytes into queued: false, and b dropped and counted,
// when that passes LinkBytes.
func (l *link) reserve(b []byte) bool {
	if l.queued.Add(int64(len(b))) > LinkBytes {
		l.drop(b)
		return false
	}
	return true
}

// drop takes b, reserved but not queued, back out of queued and counts it
// in dropped.
func (l *link) drop(b []byte) {
	l.queued.Add(-int64(len(b)))
	l.dropped.Add(1)
}

func (l *link) send(f Frame) {
	b := f.encode()
	if !l.reserve(b) {
		return
	}
	select {
	case l.q <- b:
	default:
		l.drop(b)
	}
}

// sendWait is send for a worker's own sends to the master: when the queue
// is full it waits for room, up to d (the caller holds no lock and no GIL:
// the bound rule's "wait with the GIL released"), then drops and counts.
func (l *link) sendWait(f Frame, d time.Duration) {
	b := f.encode()
	if !l.reserve(b) {
		return
	}
	select {
	case l.q <- b:
		return
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l.q <- b:
	case <-t.C:
		l.drop(b)
	case <-l.done:
		l.drop(b)
	}
}

// RelayWait is how long a worker's send or group_send waits for room on
// its full link to the master before the frame is dropped.
const RelayWait = time.Second

func (l *link) write(w *bufio.Writer, b []byte) error {
	l.queued.Add(-int64(len(b)))
	_, err := w.Write(b)
	return err
}

func (l *link) writeLoop() {
	w := bufio.NewWriterSize(l.conn, 64<<10)
	for {
		var b []byte
		select {
		case b = <-l.q:
		case <-l.done:
			return
		}
		if l.write(w, b) != nil {
			return
		}
		for more := true; more; {
			select {
			case b = <-l.q:
				if l.write(w, b) != nil {
					return
				}
			default:
				more = false
			}
		}
		if w.Flush() != nil {
			return
		}
	}
}

func (l *link) close() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.conn.Close()
}

// ChannelPID returns the worker pid a process-specific channel name
// carries (turnstile.channels' client prefix ends in "-p<pid>" before the
// "!"), or 0.
func ChannelPID(name string) int {
	i := strings.IndexByte(name, '!')
	if i < 0 {
		return 0
	}
	j := strings.LastIndex(name[:i], "-p")
	if j < 0 {
		return 0
	}
	pid, err := strconv.Atoi(name[j+2 : i])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// ---- the worker's side -------------------------------------------------

// EnableRelay makes s one worker of a host: group sends go through the
// master on c, sends to another worker's channels too, and what the master
// relays is applied here. pid is this worker's (the one its channel names
// carry).
func (s *Store) EnableRelay(c net.Conn, pid int) {
	l := newLink(c)
	s.mu.Lock()
	s.relay, s.pid = l, pid
	s.mu.Unlock()
	go func() {
		r := bufio.NewReaderSize(c, 64<<10)
		for {
			f, err := readFrame(r, s.maxFrame())
			if err != nil {
				s.mu.Lock()
				s.relay = nil // the master is gone: this worker is alone
				s.mu.Unlock()
				l.close()
				return
			}
			s.applyRelayed(f)
		}
	}()
}

func (s *Store) maxFrame() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxMsg + 1024
}

// prefixConfig is the first Config opened for prefix: relayed messages
// take their capacity and expiry from it.
func (s *Store) prefixConfig(prefix string) *Config {
	for _, c := range s.configs {
		if c.Prefix == prefix {
			return c
		}
	}
	return nil
}

func (s *Store) applyRelayed(f Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.prefixConfig(f.Prefix)
	if c == nil {
		s.st.RelayDropped++
		return
	}
	if f.Op == OpGroupFrames {
		if len(f.Data) == 0 {
			return
		}
		tags := s.groupSockets(s.space(f.Prefix), c, f.Name)
		// Under s.mu, as a local one: the master's order holds.
		s.writeFrames(tags, f.Data[0] == 1, f.Data[1:])
		return
	}
	sp := s.space(f.Prefix)
	now := s.now()
	wake := map[*endpoint]struct{}{}
	switch f.Op {
	case OpGroupSend:
		s.fanOut(sp, c, f.Name, f.Data, now, wake)
	case OpSend:
		switch err := s.put(sp, c, f.Name, f.Data, now, wake); err {
		case nil:
		case ErrFull:
			s.st.DroppedFull++
		default:
			s.st.Rejected++
		}
	}
	wakeAll(wake)
}

// relayGroup tells the master a group's local membership began or ended.
// Called with s.mu held.
func (s *Store) relayGroup(op byte, prefix, group string) {
	if s.relay != nil {
		s.relay.send(Frame{Op: op, Prefix: prefix, Name: group})
	}
}

// ---- the master's side -------------------------------------------------

// Hub is the master's relay: which workers have members in which group,
// and one link per worker.
type Hub struct {
	dropped atomic.Uint64 // frames dropped on links since closed
	mu      sync.Mutex
	links   map[int]*link               // by worker pid
	groups  map[string]map[int]struct{} // prefix "\x00" group → pids
	byPID   map[int]map[string]struct{} // pid → its groups, to drop
	frames  atomic.Uint64
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{links: map[int]*link{}, groups: map[string]map[int]struct{}{}, byPID: map[int]map[string]struct{}{}}
}

// Serve relays for the worker pid on c until c closes (the worker exited),
// then drops the worker from every group. max bounds one frame.
func (h *Hub) Serve(pid int, c net.Conn, max int) {
	l := newLink(c)
	h.mu.Lock()
	h.links[pid] = l
	h.mu.Unlock()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		f, err := readFrame(r, max)
		if err != nil {
			break
		}
		h.handle(pid, f)
	}
	h.Drop(pid)
	l.close()
	h.dropped.Add(l.dropped.Load())
}

// Stats returns the frames the hub handled, the frames dropped at a link's
// bound, and the groups that have members on some worker.
func (h *Hub) Stats() (frames, dropped uint64, groups int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dropped = h.dropped.Load()
	for _, l := range h.links {
		dropped += l.dropped.Load()
	}
	return h.frames.Load(), dropped, len(h.groups)
}

// Drop forgets worker pid: its groups' memberships and its link.
func (h *Hub) Drop(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.links, pid)
	for key := range h.byPID[pid] {
		if g := h.groups[key]; g != nil {
			delete(g, pid)
			if len(g) == 0 {
				delete(h.groups, key)
			}
		}
	}
	delete(h.byPID, pid)
}

func (h *Hub) handle(pid int, f Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames.Add(1)
	key := f.Prefix + "\x00" + f.Name
	switch f.Op {
	case OpJoin:
		g := h.groups[key]
		if g == nil {
			g = map[int]struct{}{}
			h.groups[key] = g
		}
		g[pid] = struct{}{}
		if h.byPID[pid] == nil {
			h.byPID[pid] = map[string]struct{}{}
		}
		h.byPID[pid][key] = struct{}{}
	case OpLeave:
		if g := h.groups[key]; g != nil {
			delete(g, pid)
			if len(g) == 0 {
				delete(h.groups, key)
			}
		}
		delete(h.byPID[pid], key)
	case OpGroupSend, OpGroupFrames:
		for p := range h.groups[key] {
			if l := h.links[p]; l != nil {
				l.send(f)
			}
		}
	case OpSend:
		if l := h.links[ChannelPID(f.Name)]; l != nil {
			l.send(f)
		}
	}
}
