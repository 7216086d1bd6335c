// Command front serves a hello response from Go alone, either through
// net/http or through turnstile's internal/http1, so the two HTTP/1.1 front
// ends can be compared without Python (issue 3: a strict guard in front of
// net/http, or a connection layer of our own).
//
//	go run ./bench/front -impl http1 -addr 127.0.0.1:8300
//	go run ./bench/front -impl nethttp -addr 127.0.0.1:8300
package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"turnstile/internal/http1"
)

var body = []byte("Hello, World!\n")

func main() {
	impl := flag.String("impl", "http1", "http1 or nethttp")
	addr := flag.String("addr", "127.0.0.1:8300", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	switch *impl {
	case "http1":
		hdr := []byte("Content-Type: text/plain\r\n")
		status := []byte("200 OK")
		srv := &http1.Server{Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
			w.WriteHead(200, status, hdr, int64(len(body)), false)
			w.Write(body)
		})}
		log.Fatal(srv.Serve(ln))
	case "nethttp":
		log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write(body)
		})))
	default:
		log.Fatalf("unknown -impl %q", *impl)
	}
}
