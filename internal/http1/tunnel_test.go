package http1

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// fakeStream is a Stream fed by in and recording what is written.
type fakeStream struct {
	in   chan []byte // nil closes: io.EOF
	done chan struct{}

	mu     sync.Mutex
	status int
	fields []Field
	data   []byte
	ended  bool
}

func (f *fakeStream) ReadData(p []byte, deadline time.Time) (int, error) {
	b, ok := <-f.in
	if !ok {
		return 0, io.EOF
	}
	return copy(p, b), nil
}
func (f *fakeStream) Trailer() []Field { return nil }
func (f *fakeStream) WriteHeaders(status int, fields []Field, end bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
	for _, x := range fields {
		f.fields = append(f.fields, Field{Name: append([]byte(nil), x.Name...), Value: append([]byte(nil), x.Value...)})
	}
	return nil
}
func (f *fakeStream) WriteData(p []byte, end bool, deadline time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, p...)
	f.ended = f.ended || end
	return len(p), nil
}
func (f *fakeStream) Flush() error          { return nil }
func (f *fakeStream) Done() <-chan struct{} { return f.done }

// The tunnel of RFC 8441: the 101 becomes the 200's fields, reads wait
// for DATA yet see a deadline moved or a Close made while they wait.
func TestTunnelConn(t *testing.T) {
	fs := &fakeStream{in: make(chan []byte), done: make(chan struct{})}
	tc := newTunnel(fs, nil, nil)

	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\nX-A: 1\r\n\r\n"
	if n, err := tc.Write([]byte(head + "\x81\x02hi")); err != nil || n != len(head)+4 {
		t.Fatalf("first write: %d, %v", n, err)
	}
	tc.Write([]byte("\x81\x01!"))
	fs.mu.Lock()
	if fs.status != 200 || len(fs.fields) != 2 || string(fs.fields[0].Name) != "sec-websocket-protocol" ||
		string(fs.fields[0].Value) != "chat" || string(fs.fields[1].Name) != "x-a" {
		t.Errorf("head: %d %q", fs.status, fs.fields)
	}
	if string(fs.data) != "\x81\x02hi\x81\x01!" || fs.ended {
		t.Errorf("data %q, ended %v", fs.data, fs.ended)
	}
	fs.mu.Unlock()

	// DATA in pieces.
	go func() { fs.in <- []byte("abcdef") }()
	p := make([]byte, 4)
	if n, err := tc.Read(p); err != nil || string(p[:n]) != "abcd" {
		t.Errorf("read: %q, %v", p[:n], err)
	}
	if n, err := tc.Read(p); err != nil || string(p[:n]) != "ef" {
		t.Errorf("read the rest: %q, %v", p[:n], err)
	}

	// A deadline set while a Read waits ends that Read.
	start := time.Now()
	go func() {
		time.Sleep(20 * time.Millisecond)
		tc.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	}()
	if _, err := tc.Read(p); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the deadline took %v", d)
	}
	tc.SetReadDeadline(time.Time{})

	// Close ends a waiting Read.
	go func() {
		time.Sleep(20 * time.Millisecond)
		tc.Close()
	}()
	if _, err := tc.Read(p); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read across Close: %v", err)
	}
	if _, err := tc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
	<-tc.closed

	// The client's END_STREAM: io.EOF.
	fs2 := &fakeStream{in: make(chan []byte), done: make(chan struct{})}
	tc2 := newTunnel(fs2, nil, nil)
	close(fs2.in)
	if _, err := tc2.Read(p); err != io.EOF {
		t.Errorf("read at the stream's end: %v", err)
	}
	tc2.Close()
}
