package server

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"turnstile/internal/chlayer"
	"turnstile/internal/config"
	"turnstile/internal/workerctl"
)

// startLayerRelay joins this worker's channel layer to the master's relay
// (workerctl.LayerFD) when the host has several workers; alone, the layer
// stays in this process.
func startLayerRelay(cfg *config.Config, log *slog.Logger) {
	if worker == nil || cfg.Workers < 2 {
		return
	}
	f := os.NewFile(workerctl.LayerFD, "layer")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		log.Warn("channel layer: no relay to the master; groups span this worker only", "err", err)
		return
	}
	chlayer.Host.EnableRelay(c, os.Getpid())
}

// layerCollectors are the series of the Channels layer held by Go
// (internal/chlayer, turnstile.channels.ChannelLayer), read from its Stats
// at scrape time.
func layerCollectors() []prometheus.Collector {
	st := func() chlayer.Stats { return chlayer.Host.Stats() }
	counter := func(name, help string, f func(chlayer.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(st())) })
	}
	gauge := func(name, help string, f func(chlayer.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(st()) })
	}
	dropped := func(reason string, f func(chlayer.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "turnstile_layer_messages_dropped_total", Help: "Channel layer messages not delivered: full (a group_send member at capacity), expired (queued past expiry, or undrained on a closed loop), rejected (a send refused: ChannelFull, the memory or size limit; a group_send member without room at the memory limit), relay (a frame to or from the master dropped at the link's bound, or for a prefix no layer of this worker opened).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(f(st())) })
	}
	return []prometheus.Collector{
		counter("turnstile_layer_messages_sent_total", "Channel layer messages stored: queued on a channel or handed to a waiting receive (a group_send counts once per member).",
			func(s chlayer.Stats) uint64 { return s.Sent }),
		counter("turnstile_layer_messages_delivered_total", "Channel layer messages taken by a receive.",
			func(s chlayer.Stats) uint64 { return s.Delivered }),
		dropped("full", func(s chlayer.Stats) uint64 { return s.DroppedFull }),
		dropped("expired", func(s chlayer.Stats) uint64 { return s.DroppedExp }),
		dropped("rejected", func(s chlayer.Stats) uint64 { return s.RejectedFull + s.Rejected }),
		dropped("relay", func(s chlayer.Stats) uint64 { return s.RelayDropped }),
		gauge("turnstile_layer_queued_bytes", "Bytes of channel layer messages queued (msgpack).",
			func(s chlayer.Stats) float64 { return float64(s.Bytes) }),
		gauge("turnstile_layer_queued_bytes_high_water", "The most bytes of channel layer messages ever queued at once.",
			func(s chlayer.Stats) float64 { return float64(s.HighWater) }),
		gauge("turnstile_layer_queue_depth_high_water", "The longest channel queue seen (messages).",
			func(s chlayer.Stats) float64 { return float64(s.DepthHighWater) }),
		gauge("turnstile_layer_channels", "Channels with queued messages or a waiting receive.",
			func(s chlayer.Stats) float64 { return float64(s.Channels) }),
		gauge("turnstile_layer_groups", "Channel layer groups with at least one member.",
			func(s chlayer.Stats) float64 { return float64(s.Groups) }),
		counter("turnstile_layer_frames_queued_total", "WebSocket frames the layer's fan-out (group_send_frames) queued on this worker's sockets, one per socket.",
			func(s chlayer.Stats) uint64 { return s.FramesQueued }),
		counter("turnstile_layer_frames_dropped_total", "Fan-out frames dropped for a socket whose queue of unwritten fan-out frames was full (1024 frames or 4 MiB).",
			func(s chlayer.Stats) uint64 { return s.FramesDropped }),
		gauge("turnstile_layer_sockets", "Channels linked to a WebSocket session of this worker (made by new_channel in the session's task): the fan-out's reach.",
			func(s chlayer.Stats) float64 { return float64(s.Sockets) }),
	}
}

// layerDebug answers /debug/layer (JSON): the layer's counters and limits
// and its largest groups (?n=, 20 by default).
func layerDebug(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n <= 0 {
		n = 20
	}
	memory, maxMsg := chlayer.Host.Limits()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"stats":          chlayer.Host.Stats(),
		"memory_limit":   memory,
		"message_limit":  maxMsg,
		"largest_groups": chlayer.Host.LargestGroups(n),
	})
}
