package http1

import (
	"net"
	"strconv"
	"sync/atomic"
)

// AddrText is the text of a request's addresses (host and port as bytes,
// an IPv6 host without brackets), kept with the connection so that a
// bridge formats them once per connection, not once per request.
type AddrText struct {
	remote, local          net.Addr
	RemoteHost, RemotePort []byte
	LocalHost, LocalPort   []byte
}

// ConnData is state a handler keeps with one connection and shares
// between its requests: the keep-alive requests of an HTTP/1.1
// connection, the streams of an HTTP/2 or HTTP/3 connection (which run
// concurrently: its fields are atomic). http1 only makes a zero one per
// connection; its fields are the handler's.
type ConnData struct {
	// Affinity is the handler's choice for the connection plus one (0:
	// none made yet); internal/asgi keeps the event loop it assigned the
	// connection to (--loops). Set it with CompareAndSwap from 0.
	Affinity atomic.Int32
}

// Addrs returns the text of r's RemoteAddr and LocalAddr. It formats an
// address only when it differs from the one the connection's previous
// request had (a trusted proxy's client address replaces RemoteAddr per
// request). The result is valid until the next request on the connection.
func (r *Request) Addrs() *AddrText {
	t := r.addrs
	if t == nil {
		t = new(AddrText)
		r.addrs = t
	}
	if t.remote != r.RemoteAddr {
		t.remote = r.RemoteAddr
		t.RemoteHost, t.RemotePort = splitAddr(t.RemoteHost[:0], t.RemotePort[:0], r.RemoteAddr)
	}
	if t.local != r.LocalAddr {
		t.local = r.LocalAddr
		t.LocalHost, t.LocalPort = splitAddr(t.LocalHost[:0], t.LocalPort[:0], r.LocalAddr)
	}
	return t
}

// splitAddr appends a's host to host and its port to port. A Unix socket
// address has its path as host and no port; an unnamed Unix socket (a
// client that did not bind, Go's "@") has neither, so REMOTE_ADDR is ""
// as under gunicorn, whose accept(2) peer name is the empty string.
func splitAddr(host, port []byte, a net.Addr) ([]byte, []byte) {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip4 := ta.IP.To4(); ip4 != nil {
			for i, b := range ip4 {
				if i > 0 {
					host = append(host, '.')
				}
				host = strconv.AppendUint(host, uint64(b), 10)
			}
		} else {
			host = append(host, ta.IP.String()...)
		}
		return host, strconv.AppendInt(port, int64(ta.Port), 10)
	}
	if a == nil {
		return host, port
	}
	if a.Network() == "unix" {
		if name := a.String(); name != "@" {
			host = append(host, name...)
		}
		return host, port
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return append(host, a.String()...), port
	}
	return append(host, h...), append(port, p...)
}
