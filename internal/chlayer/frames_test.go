package chlayer

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// frameLog replaces SocketWriter for a test: every (tag, message) it was
// given, in order.
type frameLog struct {
	mu  sync.Mutex
	got map[uint64][]string
}

func logFrames(t *testing.T) *frameLog {
	l := &frameLog{got: map[uint64][]string{}}
	prev := SocketWriter
	SocketWriter = func(tags []uint64, text bool, data []byte) (int, int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, tag := range tags {
			l.got[tag] = append(l.got[tag], fmt.Sprintf("%v:%s", text, data))
		}
		return len(tags), 0
	}
	t.Cleanup(func() { SocketWriter = prev })
	return l
}

func (l *frameLog) of(tag uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got[tag]...)
}

// GroupSendFrames reaches the members linked to a socket, none other;
// DropSocket unlinks; the size limit holds.
func TestGroupSendFrames(t *testing.T) {
	l := logFrames(t)
	s := New()
	h := s.Open(Config{Prefix: "asgi"})
	s.BindSocket("specific.a!1", 1<<32|7)
	s.BindSocket("specific.a!2", 2<<32|7)
	for _, name := range []string{"specific.a!1", "specific.a!2", "specific.a!3"} { // !3: no socket
		_ = s.GroupAdd(h, "room", name)
	}
	if n, err := s.GroupSendFrames(h, "room", true, []byte("tick")); n != 2 || err != nil {
		t.Fatalf("GroupSendFrames: %d, %v; want 2 sockets", n, err)
	}
	s.DropSocket(2<<32 | 7)
	if n, _ := s.GroupSendFrames(h, "room", false, []byte("b")); n != 1 {
		t.Fatalf("after DropSocket: %d sockets, want 1", n)
	}
	if !reflect.DeepEqual(l.of(1<<32|7), []string{"true:tick", "false:b"}) || !reflect.DeepEqual(l.of(2<<32|7), []string{"true:tick"}) {
		t.Fatalf("frames: %v", l.got)
	}
	if _, err := s.GroupSendFrames(h, "room", true, make([]byte, DefaultMaxMessage+1)); err != ErrTooLarge {
		t.Fatalf("oversize: %v", err)
	}
	if st := s.Stats(); st.Sockets != 1 {
		t.Fatalf("Stats.Sockets = %d, want 1", st.Sockets)
	}
	// The channel's queue got nothing: frames are not messages.
	if st := s.Stats(); st.Sent != 0 {
		t.Fatalf("Stats.Sent = %d, want 0", st.Sent)
	}
}

// Across two workers the frames go through the hub: both workers' sockets
// get both senders' frames, in one order.
func TestGroupSendFramesRelay(t *testing.T) {
	l := logFrames(t)
	hub := NewHub()
	var stores []*Store
	for pid := 101; pid <= 102; pid++ {
		m, w := socketpair(t)
		go hub.Serve(pid, m, 1<<20)
		s := New()
		s.Open(Config{Prefix: "asgi"})
		s.EnableRelay(w, pid)
		t.Cleanup(func() { w.Close() })
		name := fmt.Sprintf("specific.x-p%d!a", pid)
		s.BindSocket(name, uint64(pid))
		_ = s.GroupAdd(0, "room", name)
		stores = append(stores, s)
	}
	time.Sleep(50 * time.Millisecond) // the joins reach the hub
	for i := 0; i < 40; i++ {
		_, _ = stores[i%2].GroupSendFrames(0, "room", true, []byte{'a' + byte(i%26)})
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(l.of(101)) < 40 || len(l.of(102)) < 40 {
		if time.Now().After(deadline) {
			t.Fatalf("frames: %d and %d of 40", len(l.of(101)), len(l.of(102)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !reflect.DeepEqual(l.of(101), l.of(102)) {
		t.Fatalf("orders differ:\n%v\n%v", l.of(101), l.of(102))
	}
}
