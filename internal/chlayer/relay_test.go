package chlayer

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func socketpair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// relayWorker is worker pid of hub: a Store with one layer (prefix "asgi",
// capacity) relayed over a socketpair whose master end hub serves (1 MiB
// bound). w is the worker's end; closing it is the worker going away.
func relayWorker(t *testing.T, hub *Hub, pid, capacity int) (s *Store, w net.Conn) {
	t.Helper()
	m, w := socketpair(t)
	go hub.Serve(pid, m, 1<<20)
	s = New()
	s.Open(Config{Prefix: "asgi", Capacity: capacity})
	s.EnableRelay(w, pid)
	return s, w
}

// Two workers, one hub: a group spans both, both senders' messages reach
// every member in one order, a send to the other worker's channel crosses,
// and a worker that goes away leaves the group.
func TestRelayAcrossWorkers(t *testing.T) {
	hub := NewHub()
	var stores []*Store
	var eps []uint64
	var closers []net.Conn
	for pid := 101; pid <= 102; pid++ {
		s, w := relayWorker(t, hub, pid, 1000)
		ep, _, _ := s.NewEndpoint()
		stores, eps, closers = append(stores, s), append(eps, ep), append(closers, w)
	}
	names := []string{"specific.a-p101!x", "specific.b-p102!y"}
	for i, s := range stores {
		_ = s.GroupAdd(0, "room", names[i])
	}
	time.Sleep(50 * time.Millisecond) // the joins reach the hub
	for i := 0; i < 50; i++ {
		_, _, _ = stores[i%2].GroupSend(0, "room", []byte{byte(i)})
	}
	other := "specific.b-p102!z"
	if err := stores[0].Send(0, other, []byte("direct")); err != nil {
		t.Fatal(err)
	}
	var orders [2][]byte
	deadline := time.Now().Add(3 * time.Second)
	for i, s := range stores {
		for len(orders[i]) < 50 && time.Now().Before(deadline) {
			d, ok, _ := s.Receive(0, eps[i], names[i])
			if !ok {
				s.Unwait(0, eps[i], names[i])
				time.Sleep(5 * time.Millisecond)
				continue
			}
			orders[i] = append(orders[i], d[0])
		}
	}
	if string(orders[0]) != string(orders[1]) || len(orders[0]) != 50 {
		t.Fatalf("orders differ or short:\n%v\n%v", orders[0], orders[1])
	}
	var direct []byte
	for time.Now().Before(deadline) {
		if d, ok, _ := stores[1].Receive(0, eps[1], other); ok {
			direct = d
			break
		}
		stores[1].Unwait(0, eps[1], other)
		time.Sleep(5 * time.Millisecond)
	}
	if string(direct) != "direct" {
		t.Fatalf("direct send across workers: %q", direct)
	}
	closers[1].Close() // worker 102 dies
	time.Sleep(50 * time.Millisecond)
	hub.mu.Lock()
	n := len(hub.groups["asgi\x00room"])
	hub.mu.Unlock()
	if n != 1 {
		t.Fatalf("room has %d workers after one died, want 1", n)
	}
}

func TestChannelPID(t *testing.T) {
	for name, want := range map[string]int{"specific.ab12-p42!x": 42, "chat": 0, "a-p!x": 0, "x.y!": 0, "a-p7!": 7} {
		if got := ChannelPID(name); got != want {
			t.Errorf("ChannelPID(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestRelayCost logs what one group_send costs through the hub (worker →
// master → worker on socketpairs, this machine): an indication, not a
// bound.
func TestRelayCost(t *testing.T) {
	hub := NewHub()
	var stores []*Store
	for pid := 201; pid <= 202; pid++ {
		s, w := relayWorker(t, hub, pid, 100000)
		stores = append(stores, s)
		defer w.Close()
	}
	_ = stores[1].GroupAdd(0, "room", "specific.x-p202!a")
	time.Sleep(20 * time.Millisecond)
	const n = 20000
	payload := make([]byte, 100)
	// In batches that fit the links' bound (1 MiB: past it the relay
	// drops and counts, the bound rule), so that a slow machine measures
	// a slower relay rather than drops.
	const batch = 2000
	start := time.Now()
	for i := 0; i < n; i++ {
		_, _, _ = stores[0].GroupSend(0, "room", payload)
		if (i+1)%batch == 0 {
			for stores[1].Stats().Sent < uint64(i+1) && time.Since(start) < 10*time.Second {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	for stores[1].Stats().Sent < n && time.Since(start) < 10*time.Second {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	if got := stores[1].Stats().Sent; got < n {
		t.Fatalf("%d of %d relayed", got, n)
	}
	t.Logf("relay: %d group_sends of 100 bytes worker → master → worker in %v: %.2f µs each (pipelined, %d at a time)", n, el, float64(el.Microseconds())/n, batch)
}
