package supervise

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"turnstile/internal/listen"
)

// HTTP/3's UDP sockets (--http3): one per worker slot, bound on the TCP
// listener's port with SO_REUSEPORT (listen.BindUDP), so that the kernel
// hashes each datagram to one of them by its addresses and ports and all
// datagrams of one QUIC connection reach the same slot. The master holds
// them for the life of the server: a worker respawned or replaced in a
// slot inherits the same socket (workerctl.QUICFD), and the group, hence
// the hash, never changes under the other slots' connections. SIGTTIN
// binds a socket for the new slot, SIGTTOU lets the removed slot's go
// once its worker exits (either changes the group: connections of other
// slots may land on another socket, whose worker does not know them, and
// time out or fall back to TCP). During a graceful replacement the old
// and the new worker of one slot both read its socket until the old one
// has finished (its connections were sent GOAWAY): datagrams of either's
// connections may reach the other, which drops them, and QUIC's loss
// recovery resends them.

// quicFile returns slot id's UDP socket, binding it on first use; nil
// without --http3.
func (m *Master) quicFile(id int) (*os.File, error) {
	if !m.cfg.HTTP3 {
		return nil, nil
	}
	if f := m.quic[id]; f != nil {
		return f, nil
	}
	host, port, err := net.SplitHostPort(m.addr)
	if err != nil {
		return nil, fmt.Errorf("supervise: --http3 needs a TCP listener, not %s", m.addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("supervise: --http3: port of %s: %v", m.addr, err)
	}
	if m.cfg.Host != "" && !m.activated {
		host = m.cfg.Host
	}
	f, err := listen.BindUDP(host, p)
	if err != nil {
		return nil, err
	}
	if m.quic == nil {
		m.quic = make(map[int]*os.File)
	}
	m.quic[id] = f
	return f, nil
}

// closeQUIC closes slot id's UDP socket (0: every slot's). A worker that
// inherited it keeps its own copy until it exits.
func (m *Master) closeQUIC(id int) {
	for i, f := range m.quic {
		if id == 0 || i == id {
			f.Close()
			delete(m.quic, i)
		}
	}
}
