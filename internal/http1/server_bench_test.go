package http1

import (
	"io"
	"net"
	"strings"
	"testing"
)

// BenchmarkServeHello measures the hot path: keep-alive GETs with six
// headers, pipelined in batches over a loopback TCP connection, answered
// with a 13-byte body. allocs/op counts the whole process (client too);
// the client side reads fixed-size responses and does not allocate.
func BenchmarkServeHello(b *testing.B) {
	hello := []byte("Hello, world!")
	hdr := []byte("Content-Type: text/plain\r\n")
	status := []byte("200 OK")
	srv := &Server{Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.WriteHead(200, status, hdr, int64(len(hello)), false)
		w.Write(hello)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	req := "GET /hello?x=1 HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n" +
		"Accept-Encoding: gzip\r\nAccept-Language: en\r\nCookie: a=b\r\n\r\n"
	const batch = 16
	reqs := []byte(strings.Repeat(req, batch))
	// Learn the response size once (Date has a fixed width).
	io.WriteString(c, req)
	probe := make([]byte, 4096)
	n, err := c.Read(probe)
	if err != nil {
		b.Fatal(err)
	}
	respLen := n
	resp := make([]byte, respLen*batch)

	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		k := min(batch, b.N-done)
		if _, err := c.Write(reqs[:k*len(req)]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:k*respLen]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServeHello_ZeroAllocs guards the hot path's allocation budget: zero
// heap allocations per keep-alive request after warm-up.
func TestServeHello_ZeroAllocs(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation counts are meaningless under -race; slow under -short")
	}
	r := testing.Benchmark(func(b *testing.B) { b.N = max(b.N, 5000); BenchmarkServeHello(b) })
	if a := r.AllocsPerOp(); a != 0 {
		t.Errorf("allocs/op = %d; want 0", a)
	}
}
