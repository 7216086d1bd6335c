package proxy

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pires/go-proxyproto"
)

// Listener accepts connections that start with a PROXY protocol header
// (HAProxy's "PROXY protocol" spec, versions 1 and 2), as a TCP load
// balancer sends: a net.Listener wrapper (--proxy-protocol).
//
// Accept does no I/O: the header is read on the connection's first Read,
// RemoteAddr or LocalAddr call, on the connection's own goroutine, within
// HeaderTimeout, so a slow or silent peer cannot hold up the accept loop
// (nor the accept gate under it). The parsing is go-proxyproto's.
//
// The policy:
//   - a peer in Trusted must send a header: a connection from it without
//     a valid one is closed (its first Read fails);
//   - a peer not in Trusted must not: one that sends a header is closed,
//     one that does not is served as a plain connection;
//   - a PROXY (v1 TCP4/TCP6, v2 PROXY over TCP) header makes its source
//     address the connection's RemoteAddr and its destination LocalAddr;
//     LOCAL (v2, a load balancer's health check) and UNKNOWN keep the
//     socket's addresses.
//
// Forwarding headers (Headers) then apply on top when the address the
// header gave is itself trusted.
type Listener struct {
	net.Listener
	// Trusted are the peers that must send the header
	// (--forwarded-allow-ips).
	Trusted *AllowList
	// HeaderTimeout bounds the wait for the header. Zero: 10 s.
	HeaderTimeout time.Duration
	// Logger gets one warning per refused connection, at most one per
	// second. Nil: slog.Default().
	Logger *slog.Logger

	lastWarn atomic.Int64 // unix nanoseconds of the last warning
}

// Accept wraps the next connection; it never reads from it.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{raw: c, l: l}, nil
}

// ErrHeaderRequired is the first Read's error on a connection from a
// trusted peer that did not start with a valid PROXY header.
var ErrHeaderRequired = errors.New("proxy: PROXY protocol header required from this peer")

// ErrHeaderUntrusted is the first Read's error on a connection from a peer
// not in --forwarded-allow-ips that sent a PROXY header.
var ErrHeaderUntrusted = errors.New("proxy: PROXY protocol header from a peer not in --forwarded-allow-ips")

// Conn is a connection accepted by Listener.
type Conn struct {
	raw net.Conn
	l   *Listener

	once          sync.Once
	err           error
	br            *bufio.Reader // the header's read buffer, until drained
	remote, local net.Addr
	readDeadline  atomic.Int64 // the caller's read deadline, unix ns; 0 = none
}

// headerBuf holds a whole v1 line (107 bytes), which go-proxyproto needs
// in one buffer; a v2 header is read through it.
const headerBuf = 256

func (c *Conn) header() error {
	c.once.Do(func() {
		c.remote, c.local = c.raw.RemoteAddr(), c.raw.LocalAddr()
		trusted := c.l.Trusted.Peer(c.remote)
		timeout := c.l.HeaderTimeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		deadline := time.Now().Add(timeout)
		if d := c.readDeadline.Load(); d != 0 && time.Unix(0, d).Before(deadline) {
			deadline = time.Unix(0, d)
		}
		c.raw.SetReadDeadline(deadline)
		c.br = bufio.NewReaderSize(c.raw, headerBuf)
		hdr, err := proxyproto.Read(c.br)
		restore := time.Time{}
		if d := c.readDeadline.Load(); d != 0 {
			restore = time.Unix(0, d)
		}
		c.raw.SetReadDeadline(restore)
		switch {
		case errors.Is(err, proxyproto.ErrNoProxyProtocol):
			if trusted {
				c.fail(ErrHeaderRequired, "no PROXY header")
			}
		case err != nil:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if trusted {
					c.fail(ErrHeaderRequired, "no PROXY header within the timeout")
				} else {
					c.err = err
				}
				return
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				c.err = err
				return
			}
			c.fail(err, "bad PROXY header")
		case !trusted:
			c.fail(ErrHeaderUntrusted, "PROXY header from an untrusted peer (add it to --forwarded-allow-ips)")
		case hdr.Command.IsProxy():
			if src, dst, ok := hdr.TCPAddrs(); ok {
				c.remote, c.local = src, dst
			}
		}
	})
	return c.err
}

func (c *Conn) fail(err error, why string) {
	c.err = err
	now := time.Now().UnixNano()
	if last := c.l.lastWarn.Load(); now-last < int64(time.Second) || !c.l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	log := c.l.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("proxy protocol: connection closed: "+why, "peer", c.raw.RemoteAddr().String(), "err", err.Error())
}

// Read reads the header first (once), then the stream after it.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.header(); err != nil {
		return 0, err
	}
	if c.br != nil {
		if c.br.Buffered() > 0 {
			n, err := c.br.Read(p)
			if c.br.Buffered() == 0 {
				c.br = nil
			}
			return n, err
		}
		c.br = nil
	}
	return c.raw.Read(p)
}

// RemoteAddr is the header's source address, else the socket peer's. It
// reads the header first: call it from the connection's goroutine.
func (c *Conn) RemoteAddr() net.Addr {
	c.header()
	return c.remote
}

// LocalAddr is the header's destination address, else the socket's. It
// reads the header first, as RemoteAddr does.
func (c *Conn) LocalAddr() net.Addr {
	c.header()
	return c.local
}

func (c *Conn) Write(p []byte) (int, error) { return c.raw.Write(p) }
func (c *Conn) Close() error                { return c.raw.Close() }

func (c *Conn) SetDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.raw.SetDeadline(t)
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.raw.SetReadDeadline(t)
}

func (c *Conn) setReadDeadline(t time.Time) {
	if t.IsZero() {
		c.readDeadline.Store(0)
	} else {
		c.readDeadline.Store(t.UnixNano())
	}
}

func (c *Conn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// ReadFrom lets the socket's sendfile(2) path through.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.raw.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.raw, r)
}

// CloseWrite half-closes the socket (http1's lingering close).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Raw is the accepted socket.
func (c *Conn) Raw() net.Conn { return c.raw }
