// Package chlayer holds a Channels layer's messages and groups in Go: the
// store behind turnstile.channels.ChannelLayer (python/turnstile/channels.py)
// for every loop of one worker. Pure Go; Python reaches it through
// internal/python's _turnstile_layer module (layer.c, layer.go), one cgo
// call per send, group_send, receive or drain.
//
// Three parts:
//
//   - Store (this file): one worker's channels, groups and endpoints.
//   - The relay across the workers of one host (relay.go): under
//     --workers 2 or more each worker's Store has a link to the master's
//     Hub (internal/supervise, layer.go) on the socketpair it inherits at
//     workerctl.LayerFD; the Hub tracks which workers have members of
//     which group and forwards group sends, sends to another worker's
//     channel and fan-out frames, in one order for every worker. The
//     master imports this package for the Hub; it stays pure Go.
//   - The fan-out to sockets (frames.go, group_send_frames): members that
//     are the channel of a WebSocket session of this worker get one
//     message written to their sockets by Go (SocketWriter, set by
//     internal/asgi, fanout.go), framed once; no member's receive runs.
//
// Shapes (Channels' channel layer specification,
// https://channels.readthedocs.io/en/stable/channel_layer_spec.html):
//
//   - A space is one layer prefix ("asgi" by default, the CONFIG "prefix"):
//     its channels (a FIFO of msgpack payloads each) and its groups (member
//     channel → membership deadline). Several ChannelLayer instances of one
//     prefix share a space, as several RedisChannelLayer of one prefix share
//     Redis keys.
//   - A Config is one layer instance's bounds: default capacity, per-channel
//     capacities (first matching pattern wins), message expiry, group expiry.
//   - An Endpoint is one asyncio loop that waits on channels: an eventfd the
//     loop reads (loop.add_reader) and a ready list of deliveries. A receive
//     that finds its channel empty registers a waiter (channel → endpoint);
//     the next message for that channel goes to the endpoint's ready list,
//     not the channel's queue, and the endpoint's eventfd is written once
//     per batch (a group_send to 100 members on one loop writes it once),
//     and only when the loop has drained since the last write (armed).
//
// Bounds: per-channel capacity (ErrFull), a message size limit
// (ErrTooLarge), a host-wide byte limit over every queued payload
// (ErrMemory). Expiry costs nothing per message: each queue is FIFO with
// one expiry per Config, so expired messages are always at the head; they
// are dropped when the channel is next touched, and a sweep once a second
// walks the channels (not the messages) for the ones nobody touches.
package chlayer

import (
	"errors"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of Send, in the caller's words (channels.py maps them to
// ChannelFull, ChannelFull with the limit named, and ValueError).
var (
	ErrFull     = errors.New("channel is full")
	ErrMemory   = errors.New("the layer's host-wide memory limit is reached")
	ErrTooLarge = errors.New("message over the layer's size limit")
	ErrHandle   = errors.New("no such layer or endpoint")
)

// Defaults of the host-wide bounds (SetLimits changes them).
const (
	DefaultMemoryLimit = 256 << 20 // bytes of queued payloads, all spaces
	DefaultMaxMessage  = 1 << 20   // bytes of one msgpack payload
)

// Config is one layer instance's bounds (the CHANNEL_LAYERS CONFIG).
type Config struct {
	Prefix      string
	Capacity    int           // messages per channel, default 100
	Expiry      time.Duration // of a queued message, default 60 s
	GroupExpiry time.Duration // of a group membership, default 86400 s
	Patterns    []Pattern     // channel_capacity, in order
}

// Pattern is one channel_capacity entry: Re matches the whole name.
type Pattern struct {
	Re       *regexp.Regexp
	Capacity int
}

// GlobPattern turns a channel_capacity glob (fnmatch: *, ?, [...]) into a
// regexp matching the whole name, as Channels' fnmatch.translate does.
func GlobPattern(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := strings.IndexByte(glob[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}

func (c *Config) capacity(name string) int {
	for _, p := range c.Patterns {
		if p.Re.MatchString(name) {
			return p.Capacity
		}
	}
	return c.Capacity
}

type entry struct {
	data    []byte
	expires int64 // monotonic ns
}

type channel struct {
	q       []entry  // FIFO; q[0] the oldest
	waiters []uint64 // endpoint ids, one per waiting receive, FIFO
}

type space struct {
	channels map[string]*channel
	groups   map[string]map[string]int64 // group → channel → deadline (ns)
}

// Delivery is one message for a waiting receive.
type Delivery struct {
	Channel string
	Data    []byte
}

type endpoint struct {
	id    uint64
	fd    int
	ready []Delivery
	armed bool // the loop drained since the last eventfd write
}

// Stats are the layer's counters since start, and its present sizes.
type Stats struct {
	Sent           uint64 `json:"sent"`            // queued, or handed to a waiting receive
	Delivered      uint64 `json:"delivered"`       // taken by a receive
	DroppedFull    uint64 `json:"dropped_full"`    // group_send members at capacity
	DroppedExp     uint64 `json:"dropped_expired"` // expired unread, or undrained on a closed endpoint
	RejectedFull   uint64 `json:"rejected_full"`   // send: ChannelFull
	Rejected       uint64 `json:"rejected_limit"`  // send or group_send: the memory or size limit
	Bytes          int64  `json:"queued_bytes"`
	HighWater      int64  `json:"queued_bytes_high_water"`
	DepthHighWater int    `json:"queue_depth_high_water"` // the longest channel queue seen
	Channels       int    `json:"channels"`
	Groups         int    `json:"groups"`
	Endpts         int    `json:"endpoints"`      // loops with a receiving end
	RelayDropped   uint64 `json:"relay_dropped"`  // relayed frames for no layer of their prefix, or over the link's bound
	FramesQueued   uint64 `json:"frames_queued"`  // group_send_frames: frames queued on a socket (frames.go)
	FramesDropped  uint64 `json:"frames_dropped"` // group_send_frames: a socket's queue of fan-out frames was full
	Sockets        int    `json:"sockets"`        // channels linked to a WebSocket session
}

// GroupSize names one group and its members, for /debug/layer.
type GroupSize struct {
	Prefix  string `json:"prefix"`
	Group   string `json:"group"`
	Members int    `json:"members"`
}

// Store is every space of one worker.
type Store struct {
	mu         sync.Mutex
	spaces     map[string]*space
	configs    []*Config
	eps        map[uint64]*endpoint
	nextEP     uint64
	limit      int64
	maxMsg     int
	st         Stats
	now        func() int64
	sweepStart sync.Once
	relay      *link               // to the master (relay.go); nil: this worker alone
	pid        int                 // this worker's, as its channel names carry it
	socks      map[string]uint64   // channel → its WebSocket session's tag (frames.go)
	sockNames  map[uint64][]string // tag → its channels, to drop
}

// Host is the worker's store.
var Host = New()

var start = time.Now()

func monoNow() int64 { return int64(time.Since(start)) }

// New returns an empty store with the default bounds.
func New() *Store {
	return &Store{
		spaces: map[string]*space{},
		eps:    map[uint64]*endpoint{},
		limit:  DefaultMemoryLimit,
		maxMsg: DefaultMaxMessage,
		now:    monoNow,
	}
}

// SetLimits sets the host-wide byte limit and the size limit of one
// message (0 keeps the present value).
func (s *Store) SetLimits(memory int64, maxMessage int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if memory > 0 {
		s.limit = memory
	}
	if maxMessage > 0 {
		s.maxMsg = maxMessage
	}
}

// Limits returns the host-wide byte limit and the size limit of a message.
func (s *Store) Limits() (int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit, s.maxMsg
}

// Open registers a layer instance's Config and returns its handle.
func (s *Store) Open(c Config) int {
	if c.Capacity <= 0 {
		c.Capacity = 100
	}
	if c.Expiry <= 0 {
		c.Expiry = 60 * time.Second
	}
	if c.GroupExpiry <= 0 {
		c.GroupExpiry = 86400 * time.Second
	}
	s.sweepStart.Do(func() { go s.sweepLoop() })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configs = append(s.configs, &c)
	return len(s.configs) - 1
}

func (s *Store) config(h int) *Config {
	if h < 0 || h >= len(s.configs) {
		return nil
	}
	return s.configs[h]
}

func (s *Store) space(prefix string) *space {
	sp := s.spaces[prefix]
	if sp == nil {
		sp = &space{channels: map[string]*channel{}, groups: map[string]map[string]int64{}}
		s.spaces[prefix] = sp
	}
	return sp
}

// sendableLocked returns layer h's Config for a send of data: ErrHandle
// for a handle Open did not return, ErrTooLarge (counted in Rejected) for
// data over the size limit. Called with s.mu held.
func (s *Store) sendableLocked(h int, data []byte) (*Config, error) {
	c := s.config(h)
	if c == nil {
		return nil, ErrHandle
	}
	if len(data) > s.maxMsg {
		s.st.Rejected++
		return nil, ErrTooLarge
	}
	return c, nil
}

// layerLocked returns layer h's Config and its space (made on first use);
// ErrHandle for a handle Open did not return. Called with s.mu held.
func (s *Store) layerLocked(h int) (*Config, *space, error) {
	c := s.config(h)
	if c == nil {
		return nil, nil, ErrHandle
	}
	return c, s.space(c.Prefix), nil
}

// expire drops the expired head of ch's queue.
func (s *Store) expire(ch *channel, now int64) {
	n := 0
	for n < len(ch.q) && ch.q[n].expires <= now {
		s.st.Bytes -= int64(len(ch.q[n].data))
		n++
	}
	if n > 0 {
		s.st.DroppedExp += uint64(n)
		clear(ch.q[:n])
		ch.q = ch.q[n:]
	}
}

func (s *Store) forget(sp *space, name string, ch *channel) {
	if len(ch.q) == 0 && len(ch.waiters) == 0 {
		delete(sp.channels, name)
	}
}

// put queues data on one channel or hands it to its first waiter; wake
// collects the endpoints to wake after the batch.
func (s *Store) put(sp *space, c *Config, name string, data []byte, now int64, wake map[*endpoint]struct{}) error {
	ch := sp.channels[name]
	if ch == nil {
		ch = &channel{}
		sp.channels[name] = ch
	}
	s.expire(ch, now)
	for len(ch.waiters) > 0 {
		id := ch.waiters[0]
		ch.waiters = ch.waiters[1:]
		ep := s.eps[id]
		if ep == nil {
			continue
		}
		ep.ready = append(ep.ready, Delivery{name, data})
		wake[ep] = struct{}{}
		s.st.Sent++
		s.st.Delivered++
		return nil
	}
	if len(ch.q) >= c.capacity(name) {
		s.forget(sp, name, ch)
		return ErrFull
	}
	if s.st.Bytes+int64(len(data)) > s.limit {
		s.forget(sp, name, ch)
		return ErrMemory
	}
	ch.q = append(ch.q, entry{data, now + int64(c.Expiry)})
	s.st.Bytes += int64(len(data))
	s.st.Sent++
	if s.st.Bytes > s.st.HighWater {
		s.st.HighWater = s.st.Bytes
	}
	if len(ch.q) > s.st.DepthHighWater {
		s.st.DepthHighWater = len(ch.q)
	}
	return nil
}

// wakeAll writes each endpoint's eventfd once, if it drained since the
// last write. Called with s.mu held (an endpoint's fd closes under it).
func wakeAll(wake map[*endpoint]struct{}) {
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for ep := range wake {
		if ep.armed {
			ep.armed = false
			_, _ = unix.Write(ep.fd, one)
		}
	}
}

// Send queues data (one msgpack payload, owned by the store from now on)
// on channel name of layer h: ErrFull at the channel's capacity, ErrMemory
// at the host-wide limit, ErrTooLarge over the size limit.
func (s *Store) Send(h int, name string, data []byte) error {
	s.mu.Lock()
	c, err := s.sendableLocked(h, data)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if l := s.relay; l != nil {
		if pid := ChannelPID(name); pid != 0 && pid != s.pid {
			s.st.Sent++
			s.mu.Unlock()
			l.sendWait(Frame{Op: OpSend, Prefix: c.Prefix, Name: name, Data: data}, RelayWait)
			return nil
		}
	}
	defer s.mu.Unlock()
	wake := map[*endpoint]struct{}{}
	err = s.put(s.space(c.Prefix), c, name, data, s.now(), wake)
	switch err {
	case ErrFull:
		s.st.RejectedFull++
	case ErrMemory:
		s.st.Rejected++
	}
	wakeAll(wake)
	return err
}

// GroupSend queues data on every live member of group: members at
// capacity skip it (full counts them, as channels_redis logs them); past
// the host-wide limit a member that would queue it skips it too (each
// counted in Rejected), the others (a receive waiting) still get it, and
// the error is ErrMemory: members is then how many got it. Under the
// relay the fan-out happens later, in each worker: err is nil.
func (s *Store) GroupSend(h int, group string, data []byte) (members, full int, err error) {
	s.mu.Lock()
	c, err := s.sendableLocked(h, data)
	if err != nil {
		s.mu.Unlock()
		return 0, 0, err
	}
	if l := s.relay; l != nil {
		// Through the master, which orders it with every other worker's
		// group_sends and sends it back here too. Unlocked: a full link
		// waits (RelayWait) without holding up this worker's receives.
		s.mu.Unlock()
		l.sendWait(Frame{Op: OpGroupSend, Prefix: c.Prefix, Name: group, Data: data}, RelayWait)
		return 0, 0, nil
	}
	defer s.mu.Unlock()
	wake := map[*endpoint]struct{}{}
	members, full, err = s.fanOut(s.space(c.Prefix), c, group, data, s.now(), wake)
	wakeAll(wake)
	return members, full, err
}

// fanOut queues data on every live member of group in sp. Called with
// s.mu held.
func (s *Store) fanOut(sp *space, c *Config, group string, data []byte, now int64, wake map[*endpoint]struct{}) (members, full int, err error) {
	g := sp.groups[group]
	if len(g) == 0 {
		return 0, 0, nil
	}
	names := make([]string, 0, len(g))
	for name, deadline := range g {
		if deadline <= now {
			delete(g, name)
			continue
		}
		names = append(names, name)
	}
	if len(g) == 0 {
		delete(sp.groups, group)
		s.relayGroup(OpLeave, c.Prefix, group)
	}
	sort.Strings(names) // one order for every sender; cheap next to the sends
	for _, name := range names {
		e := s.put(sp, c, name, data, now, wake)
		if e == nil {
			members++
			continue
		}
		if e == ErrFull {
			full++
			s.st.DroppedFull++
			continue
		}
		// The memory limit: this member goes without, but the fan-out goes
		// on, so that a later member whose receive is waiting (which takes
		// no queue memory) still gets it, whatever its name's place.
		err = e
		s.st.Rejected++
	}
	return members, full, err
}

// Receive takes the oldest message of channel name for endpoint ep, or,
// when there is none, registers one waiter there: the next message goes to
// the endpoint's ready list and wakes it.
func (s *Store) Receive(h int, ep uint64, name string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.config(h)
	e := s.eps[ep]
	if c == nil || e == nil {
		return nil, false, ErrHandle
	}
	sp := s.space(c.Prefix)
	ch := sp.channels[name]
	if ch == nil {
		ch = &channel{}
		sp.channels[name] = ch
	}
	s.expire(ch, s.now())
	if len(ch.q) > 0 {
		d := ch.q[0].data
		ch.q[0] = entry{}
		ch.q = ch.q[1:]
		s.st.Bytes -= int64(len(d))
		s.st.Delivered++
		s.forget(sp, name, ch)
		return d, true, nil
	}
	ch.waiters = append(ch.waiters, ep)
	return nil, false, nil
}

// Unwait withdraws one waiter of endpoint ep on channel name (a cancelled
// receive). A waiter already served is not there: nothing to withdraw.
func (s *Store) Unwait(h int, ep uint64, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.config(h)
	if c == nil {
		return
	}
	sp := s.space(c.Prefix)
	ch := sp.channels[name]
	if ch == nil {
		return
	}
	for i := len(ch.waiters) - 1; i >= 0; i-- {
		if ch.waiters[i] == ep {
			ch.waiters = append(ch.waiters[:i], ch.waiters[i+1:]...)
			break
		}
	}
	s.forget(sp, name, ch)
}

// NewEndpoint makes an endpoint and its eventfd (non-blocking, for the
// loop's add_reader).
func (s *Store) NewEndpoint() (uint64, int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return 0, -1, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextEP++
	s.eps[s.nextEP] = &endpoint{id: s.nextEP, fd: fd, armed: true}
	return s.nextEP, fd, nil
}

// Take reads the endpoint's eventfd and returns its deliveries, arming it
// for the next write. The loop calls it from its reader callback.
func (s *Store) Take(ep uint64) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.eps[ep]
	if e == nil {
		return nil
	}
	var buf [8]byte
	_, _ = unix.Read(e.fd, buf[:])
	d := e.ready
	e.ready = nil
	e.armed = true
	return d
}

// CloseEndpoint closes the endpoint's eventfd; its waiters are skipped
// from now on and its undrained deliveries dropped.
func (s *Store) CloseEndpoint(ep uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.eps[ep]
	if e == nil {
		return
	}
	delete(s.eps, ep)
	s.st.DroppedExp += uint64(len(e.ready))
	_ = unix.Close(e.fd)
}

// GroupAdd adds channel name to group (or renews its membership).
func (s *Store) GroupAdd(h int, group, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, sp, err := s.layerLocked(h)
	if err != nil {
		return err
	}
	g := sp.groups[group]
	if g == nil {
		g = map[string]int64{}
		sp.groups[group] = g
		s.relayGroup(OpJoin, c.Prefix, group)
	}
	g[name] = s.now() + int64(c.GroupExpiry)
	return nil
}

// GroupDiscard removes channel name from group.
func (s *Store) GroupDiscard(h int, group, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, sp, err := s.layerLocked(h)
	if err != nil {
		return err
	}
	if g := sp.groups[group]; g != nil {
		delete(g, name)
		if len(g) == 0 {
			delete(sp.groups, group)
			s.relayGroup(OpLeave, c.Prefix, group)
		}
	}
	return nil
}

// Flush empties the space of layer h: every message and group. Waiters
// stay (their receives still wait).
func (s *Store) Flush(h int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, sp, err := s.layerLocked(h)
	if err != nil {
		return err
	}
	for name, ch := range sp.channels {
		for _, e := range ch.q {
			s.st.Bytes -= int64(len(e.data))
		}
		ch.q = nil
		s.forget(sp, name, ch)
	}
	for group := range sp.groups {
		s.relayGroup(OpLeave, c.Prefix, group)
	}
	sp.groups = map[string]map[string]int64{}
	return nil
}

// Sweep drops expired messages and memberships everywhere: one look at the
// head of each channel, one at each membership.
func (s *Store) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for prefix, sp := range s.spaces {
		for name, ch := range sp.channels {
			s.expire(ch, now)
			s.forget(sp, name, ch)
		}
		for gname, g := range sp.groups {
			for name, deadline := range g {
				if deadline <= now {
					delete(g, name)
				}
			}
			if len(g) == 0 {
				delete(sp.groups, gname)
				s.relayGroup(OpLeave, prefix, gname)
			}
		}
	}
}

func (s *Store) sweepLoop() {
	for range time.Tick(time.Second) {
		s.Sweep()
	}
}

// Stats returns the counters and present sizes.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	for _, sp := range s.spaces {
		st.Channels += len(sp.channels)
		st.Groups += len(sp.groups)
	}
	st.Endpts = len(s.eps)
	st.Sockets = len(s.socks)
	st.FramesQueued = frameStats.queued.Load()
	st.FramesDropped = frameStats.dropped.Load()
	if s.relay != nil {
		st.RelayDropped += s.relay.dropped.Load()
	}
	return st
}

// LargestGroups returns up to n groups, the most members first.
func (s *Store) LargestGroups(n int) []GroupSize {
	s.mu.Lock()
	var out []GroupSize
	for prefix, sp := range s.spaces {
		for g, m := range sp.groups {
			out = append(out, GroupSize{prefix, g, len(m)})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Members != out[j].Members {
			return out[i].Members > out[j].Members
		}
		return out[i].Group < out[j].Group
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
