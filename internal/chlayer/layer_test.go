package chlayer

import (
	"errors"
	"testing"
	"time"
)

func TestSendReceiveOrderCapacity(t *testing.T) {
	s := New()
	re, _ := GlobPattern("tiny*")
	h := s.Open(Config{Prefix: "t", Capacity: 3, Patterns: []Pattern{{re, 1}}})
	ep, _, err := s.NewEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseEndpoint(ep)
	for i := 0; i < 3; i++ {
		if err := s.Send(h, "a", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(h, "a", []byte{9}); !errors.Is(err, ErrFull) {
		t.Fatalf("4th send: %v, want ErrFull", err)
	}
	if err := s.Send(h, "tiny1", []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(h, "tiny1", []byte{1}); !errors.Is(err, ErrFull) {
		t.Fatalf("tiny: %v, want ErrFull", err)
	}
	for i := 0; i < 3; i++ {
		d, ok, _ := s.Receive(h, ep, "a")
		if !ok || d[0] != byte(i) {
			t.Fatalf("receive %d: %v %v", i, d, ok)
		}
	}
	// empty: a waiter; the next send goes to the endpoint
	if _, ok, _ := s.Receive(h, ep, "a"); ok {
		t.Fatal("empty channel gave a message")
	}
	if err := s.Send(h, "a", []byte{7}); err != nil {
		t.Fatal(err)
	}
	got := s.Take(ep)
	if len(got) != 1 || got[0].Channel != "a" || got[0].Data[0] != 7 {
		t.Fatalf("take: %+v", got)
	}
}

func TestGroupSendOneWakePerEndpoint(t *testing.T) {
	s := New()
	h := s.Open(Config{Prefix: "g", Capacity: 2})
	ep, _, _ := s.NewEndpoint()
	defer s.CloseEndpoint(ep)
	for _, n := range []string{"c1", "c2", "c3"} {
		_ = s.GroupAdd(h, "room", n)
		if _, ok, _ := s.Receive(h, ep, n); ok {
			t.Fatal("message on an empty channel")
		}
	}
	_ = s.GroupDiscard(h, "room", "c2")
	members, full, err := s.GroupSend(h, "room", []byte("x"))
	if err != nil || members != 2 || full != 0 {
		t.Fatalf("group send: %d %d %v", members, full, err)
	}
	if got := s.Take(ep); len(got) != 2 {
		t.Fatalf("take: %+v", got)
	}
	// c1 and c3 queue 2 each, the third is dropped as full
	for i := 0; i < 3; i++ {
		_, full, _ = s.GroupSend(h, "room", []byte("y"))
	}
	if full != 2 {
		t.Fatalf("full = %d, want 2", full)
	}
	if st := s.Stats(); st.DroppedFull != 2 || st.Groups != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestExpiryAndMemoryLimit(t *testing.T) {
	s := New()
	var now int64
	s.now = func() int64 { return now }
	h := s.Open(Config{Prefix: "e", Expiry: time.Second, GroupExpiry: 2 * time.Second})
	ep, _, _ := s.NewEndpoint()
	_ = s.Send(h, "c", []byte("old"))
	now += int64(600 * time.Millisecond)
	_ = s.Send(h, "c", []byte("new"))
	now += int64(600 * time.Millisecond)
	d, ok, _ := s.Receive(h, ep, "c")
	if !ok || string(d) != "new" {
		t.Fatalf("got %q %v, want new", d, ok)
	}
	_ = s.GroupAdd(h, "g", "c")
	now += int64(3 * time.Second)
	s.Sweep()
	if st := s.Stats(); st.Groups != 0 || st.DroppedExp != 1 {
		t.Fatalf("stats %+v", st)
	}
	s.SetLimits(10, 8)
	if err := s.Send(h, "m", make([]byte, 9)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
	_ = s.Send(h, "m", make([]byte, 8))
	if err := s.Send(h, "m", make([]byte, 8)); !errors.Is(err, ErrMemory) {
		t.Fatalf("%v, want ErrMemory", err)
	}
}

func TestGlobPattern(t *testing.T) {
	for _, c := range []struct {
		glob, name string
		ok         bool
	}{{"tiny", "tiny", true}, {"tiny", "tinyx", false}, {"http.response!*", "http.response!abc", true}, {"a?c", "abc", true}, {"[ab]x", "bx", true}, {"[!ab]x", "bx", false}} {
		re, err := GlobPattern(c.glob)
		if err != nil {
			t.Fatal(err)
		}
		if re.MatchString(c.name) != c.ok {
			t.Errorf("%q ~ %q: %v", c.glob, c.name, !c.ok)
		}
	}
}

// Past the memory limit a group send skips the members that would queue
// it, counts each in Rejected, and still reaches a later member (by name)
// whose receive is waiting.
func TestGroupSendAtMemoryLimit(t *testing.T) {
	s := New()
	h := s.Open(Config{Prefix: "gm", Capacity: 10, Expiry: time.Minute, GroupExpiry: time.Minute})
	ep, _, err := s.NewEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	s.SetLimits(10, 8)
	_ = s.Send(h, "fill", make([]byte, 8))
	for _, m := range []string{"a", "b", "z"} {
		_ = s.GroupAdd(h, "g", m)
	}
	if _, ok, _ := s.Receive(h, ep, "z"); ok {
		t.Fatal("z had a message")
	}
	members, full, err := s.GroupSend(h, "g", []byte("msg"))
	if !errors.Is(err, ErrMemory) || members != 1 || full != 0 {
		t.Fatalf("members %d full %d err %v; want 1, 0, ErrMemory", members, full, err)
	}
	if d := s.Take(ep); len(d) != 1 || d[0].Channel != "z" {
		t.Fatalf("deliveries %+v; want one to z", d)
	}
	if st := s.Stats(); st.Rejected != 2 {
		t.Fatalf("Rejected %d, want 2 (a and b)", st.Rejected)
	}
}
