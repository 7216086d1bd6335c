package supervise

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"turnstile/internal/chlayer"
	"turnstile/internal/config"
)

// layerHub relays the channel layer between the workers
// (internal/chlayer, relay.go; docs/design.md, "Across the workers of one
// host"): which workers have members in which group, and one link per
// worker, on the socketpair each worker inherits at workerctl.LayerFD. A
// worker that exits closes its end: Serve returns and drops it from every
// group.
var layerHub = chlayer.NewHub()

// layerPair makes a worker's relay socketpair: the master's end as a
// net.Conn, the worker's as a file to inherit.
func layerPair() (net.Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("supervise: layer socketpair: %w", err)
	}
	mf := os.NewFile(uintptr(fds[0]), "layer-master")
	c, err := net.FileConn(mf)
	mf.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("supervise: layer socketpair: %w", err)
	}
	return c, os.NewFile(uintptr(fds[1]), "layer"), nil
}

// layerMaxFrame bounds one relayed frame: a message at
// --channel-layer-max-message and its names.
func layerMaxFrame(cfg *config.Config) int {
	return int(cfg.ChannelLayerMaxMessage) + 1024
}
