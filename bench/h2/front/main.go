// Command front serves a hello response over HTTP/2 (h2c with prior
// knowledge) from Go alone, without Python: through turnstile's front end
// (internal/http1 with internal/h2, each stream an http1 Request and
// ResponseWriter) or through golang.org/x/net/http2's ServeConn with an
// http.Handler. The difference is the cost of turnstile's stream bridge;
// what both cost is x/net/http2's (bench/h2/README.md).
//
//	go build -o bench/work/h2front ./bench/h2/front
//	bench/work/h2front -impl turnstile -addr 127.0.0.1:8301
//	bench/work/h2front -impl xnet -addr 127.0.0.1:8301
package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"golang.org/x/net/http2"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

var body = []byte("Hello, World!\n")

func main() {
	impl := flag.String("impl", "turnstile", "turnstile or xnet")
	addr := flag.String("addr", "127.0.0.1:8301", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	switch *impl {
	case "turnstile":
		hdr := []byte("Content-Type: text/plain\r\n")
		status := []byte("200 OK")
		srv := &http1.Server{
			Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
				w.WriteHead(200, status, hdr, int64(len(body)), false)
				w.Write(body)
			}),
			HTTP2: h2.New(h2.Config{MaxConcurrentStreams: 200}, nil),
		}
		log.Fatal(srv.Serve(ln))
	case "xnet":
		h2s := &http2.Server{MaxConcurrentStreams: 200}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "14")
			w.Write(body)
		})
		for {
			c, err := ln.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go h2s.ServeConn(c, &http2.ServeConnOpts{Handler: h})
		}
	default:
		log.Fatalf("unknown -impl %q", *impl)
	}
}
