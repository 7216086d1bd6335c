// Package config holds turnstile's settings: the table that defines each
// one once (Settings, settings.go: name, kind, default, doc, aliases), the
// Config struct their values go to, the environment's A/B switches
// (switches.go), and Validate. Register binds the table's flags to a
// Config at their defaults; Defaults returns one. A field comment below
// says what the value means and what its 0 means; the default it quotes
// is the table's.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"turnstile/internal/accesslog"
	"turnstile/internal/proxy"
	"turnstile/internal/static"
	"turnstile/internal/tlsconf"
)

// Defaults that other packages need as well; every setting's default is
// in the table (settings.go), which uses these.
const (
	DefaultHost            = "127.0.0.1"
	DefaultPort            = 8000
	DefaultAdminBind       = "127.0.0.1:9191"
	DefaultBlockingThreads = 4
	// DefaultSessionThreads is --session-threads: on the GIL build a pool
	// adds overlap of waits (a database commit) and isolation, not CPU;
	// 4, as --blocking-threads, keeps a worker at 8 database connections.
	DefaultSessionThreads = 4
	MaxRequestBufferBytes = 64 << 20 // per request, in memory: more is spooled to disk
	// MaxLoops caps --loops: 64 event loops (and Python threads) per
	// worker. A fixed number rather than a multiple of the cores: on the
	// GIL build the loops buy isolation, not CPU, so their useful count
	// does not follow the cores, and a typo (--loops 1000) should fail
	// the same way on every machine.
	MaxLoops = 64
)

// Config is the whole configuration of a turnstile worker.
type Config struct {
	// App is MODULE:ATTR, the WSGI or ASGI callable. Required.
	App string `json:"app"`
	// ConfigFile is --config, the TOML file internal/cliconf read (its
	// keys are flag names). Chdir is the directory the master changes to
	// first, EnvFile the dotenv file it reads (cmd/turnstile). Bind is
	// gunicorn's --bind, turned into Host and Port or UDS.
	ConfigFile string   `json:"config,omitempty"`
	Chdir      string   `json:"chdir,omitempty"`
	EnvFile    string   `json:"env_file,omitempty"`
	Bind       []string `json:"bind,omitempty"`
	// Switches are the environment's A/B switches (switches.go), read
	// by cmd/turnstile with the settings.
	Switches Switches `json:"-"`
	// Factory: ATTR is a factory to call (with no arguments) for the app.
	Factory bool `json:"factory,omitempty"`
	// Interface is auto, wsgi or asgi. Default: auto (a coroutine function
	// or an object whose __call__ is one is ASGI).
	Interface string `json:"interface,omitempty"`
	// AppDir is put first on sys.path. Default: the current directory.
	AppDir string `json:"app_dir,omitempty"`
	// Venv is a virtualenv made by the Python the binary was built with
	// (internal/venv checks its pyvenv.cfg). Default: $VIRTUAL_ENV, else
	// none.
	Venv string `json:"venv,omitempty"`
	// RootPath is the path prefix the app is mounted at (SCRIPT_NAME,
	// ASGI root_path). Default: "".
	RootPath string `json:"root_path,omitempty"`

	// ProxyHeaders applies X-Forwarded-For/-Proto/-Host/-Port and RFC
	// 7239 Forwarded from peers in ForwardedAllowIPs (internal/proxy).
	// Default on (the flag's default); the zero value is off.
	ProxyHeaders bool `json:"proxy_headers,omitempty"`
	// ForwardedAllowIPs are the trusted proxies: comma-separated IPs and
	// CIDR prefixes, or "*". Default: $FORWARDED_ALLOW_IPS, else
	// "127.0.0.1,::1". A Unix-socket peer is always trusted.
	ForwardedAllowIPs string `json:"forwarded_allow_ips,omitempty"`
	// ProxyProtocol expects a PROXY protocol v1/v2 header on connections
	// from ForwardedAllowIPs peers (and refuses one from other peers).
	// Default off.
	ProxyProtocol bool `json:"proxy_protocol,omitempty"`
	// TrustedProxies is ForwardedAllowIPs parsed, set by Validate.
	TrustedProxies *proxy.AllowList `json:"-"`

	// Host and Port: the TCP address to serve. Default 127.0.0.1:8000.
	// Port 0 picks a free port (logged at start-up).
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
	// UDS is a Unix socket path to serve instead of Host:Port.
	UDS string `json:"uds,omitempty"`
	// Backlog is the listen(2) backlog, in connections. Default 2048.
	Backlog int `json:"backlog,omitempty"`

	// BlockingThreads is the number of Python threads running WSGI
	// requests. Default 4.
	BlockingThreads int `json:"blocking_threads,omitempty"`
	// SessionThreads is the number of Python threads running the
	// thread-sensitive sync calls of ASGI WebSocket sessions, each session
	// pinned to one (docs/design.md, "Sync work of async apps"). Default
	// 4; 0: off (asgiref's one thread, shared by every session).
	SessionThreads int `json:"session_threads,omitempty"`
	// QueueSize bounds the requests waiting for a Python thread; a
	// request arriving at a full queue is answered 503 with Retry-After.
	// Default 1024.
	QueueSize int `json:"queue_size,omitempty"`
	// QueueTimeout is how long a request may wait for a Python thread
	// before it is answered 503. Default 30s; 0 or negative: no limit.
	QueueTimeout time.Duration `json:"queue_timeout,omitempty"`
	// SwitchInterval is sys.setswitchinterval, in seconds: how long a
	// thread running Python bytecode keeps the GIL while another waits.
	// Default 0: CPython's own (0.005).
	SwitchInterval float64 `json:"switch_interval,omitempty"`
	// Lifespan is the ASGI lifespan mode: auto (use it if the app supports
	// it), on (require it) or off. Default auto.
	Lifespan string `json:"lifespan,omitempty"`
	// Loop is the asyncio event loop for ASGI apps: auto (uvloop when
	// installed), asyncio or uvloop. Default auto.
	Loop string `json:"loop,omitempty"`
	// Loops is how many asyncio event loops an ASGI worker runs, each on
	// its own Python thread (ts-loop-0 .. ts-loop-<Loops-1>); each new
	// connection is served by one of them for its life. Default 1;
	// 1..MaxLoops.
	Loops int `json:"loops,omitempty"`
	// ExecutorThreads is the size of the loop's default executor
	// (run_in_executor(None), asyncio.to_thread). Default 8.
	ExecutorThreads int `json:"executor_threads,omitempty"`
	// WSMaxSizeBytes is the largest WebSocket message accepted, in bytes
	// (after decompression); a larger one, or a frame header announcing
	// one, closes the connection with 1009. Default 16 MiB (uvicorn's
	// --ws-max-size).
	WSMaxSizeBytes int64 `json:"ws_max_size_bytes,omitempty"`
	// ChannelLayerMemoryBytes bounds the bytes of channel layer messages a
	// worker holds queued (internal/chlayer), every channel together;
	// --channel-layer-memory, in MiB. Default 256 MiB.
	ChannelLayerMemoryBytes int64 `json:"channel_layer_memory_bytes,omitempty"`
	// ChannelLayerMaxMessage is the largest channel layer message, bytes of
	// msgpack (--channel-layer-max-message). Default 1 MiB.
	ChannelLayerMaxMessage int64 `json:"channel_layer_max_message,omitempty"`
	// WSMaxQueue is how many received WebSocket messages may wait for the
	// app's receive() before the server stops reading that connection.
	// Default 32.
	WSMaxQueue int `json:"ws_max_queue,omitempty"`
	// WSPingInterval: the server pings each WebSocket client this often.
	// Default 20s (the table's); zero: no
	// pings.
	WSPingInterval time.Duration `json:"ws_ping_interval,omitempty"`
	// WSPingTimeout: a ping with no pong within it closes the WebSocket
	// with 1011. Default 20s (the table's);
	// zero: pings are not timed.
	WSPingTimeout time.Duration `json:"ws_ping_timeout,omitempty"`
	// WSPerMessageDeflate negotiates permessage-deflate compression
	// (RFC 7692) with WebSocket clients that offer it. Default on (the
	// flag's default); the zero value is off.
	WSPerMessageDeflate bool `json:"ws_per_message_deflate,omitempty"`
	// LoopStallThreshold: an event loop that has not turned for this long
	// is stalled; the watchdog samples its stack and logs it. Default
	// 100ms (the table's); zero disables,
	// as uvicorn users expect of a threshold.
	LoopStallThreshold time.Duration `json:"loop_stall_threshold,omitempty"`
	// SlowRequestThreshold: a WSGI request running this long has its
	// Python stack logged, and again at each doubling. Default 10s
	// (the table's); zero disables.
	SlowRequestThreshold time.Duration `json:"slow_request_threshold,omitempty"`
	// Workers is the number of worker processes the master runs, each
	// with its own CPython (gunicorn's --workers). Default 1: a master and
	// one worker.
	Workers int `json:"workers,omitempty"`
	// StartupTimeout bounds the time from starting a worker to its
	// "ready" (app imported, serving). A worker past it at first start
	// stops the server; a replacement past it is killed and the running
	// worker kept. A slow import is not a stall: keep it generous.
	// Default 120s; 0: no limit.
	StartupTimeout time.Duration `json:"startup_timeout,omitempty"`
	// Timeout bounds how long a worker may be stuck: a WSGI request a
	// pool thread has been running (not counting its time queued), or
	// the ASGI event loop not turning, past it is logged and the worker
	// replaced gracefully (the replacement starts, then the old worker
	// stops accepting and gets GracefulTimeout to finish). Default 0: off.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxRequests recycles a worker after it has served this many
	// requests, plus a random 0..MaxRequestsJitter per worker so that
	// workers do not recycle together. Default 0: never.
	MaxRequests       int `json:"max_requests,omitempty"`
	MaxRequestsJitter int `json:"max_requests_jitter,omitempty"`
	// WorkersLifetime recycles a worker this long after it became ready.
	// Default 0: never.
	WorkersLifetime time.Duration `json:"workers_lifetime,omitempty"`
	// WorkersMaxRSSBytes recycles a worker whose resident set size
	// exceeds it, in bytes (the flag --workers-max-rss is in MiB),
	// checked every few seconds. Default 0: no limit.
	WorkersMaxRSSBytes int64 `json:"workers_max_rss_bytes,omitempty"`
	// Reload restarts the workers (one by one, like SIGHUP) when a .py
	// file under AppDir, or a file matching ReloadInclude, changes. For
	// development. Default off.
	Reload bool `json:"reload,omitempty"`
	// ReloadInclude are extra glob patterns (path.Match on the file name,
	// or on the path relative to AppDir when the pattern has a /) that
	// trigger a reload. Default none.
	ReloadInclude []string `json:"reload_include,omitempty"`
	// PidFile is where the master writes its pid, removed at exit.
	// Default "": none.
	PidFile string `json:"pid_file,omitempty"`
	// User and Group: the workers run as this user and group (names or
	// numeric ids; Group defaults to User's primary group), started with
	// those credentials after the master bound the sockets; the master
	// stays as it was started (root), like gunicorn's. Default "": the
	// master's own.
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
	// Umask is the master's umask (octal, like gunicorn's --umask: "0o22",
	// "022", "22"), set before it creates any socket or file; the workers
	// inherit it. Default "": the inherited umask, unchanged.
	Umask string `json:"umask,omitempty"`

	// Static mounts directories at URL prefixes, served in Go before the
	// app: "URL_PREFIX=DIR" values (--static /static=./staticfiles,
	// repeatable). DIR is made absolute at start and must be a directory.
	// Default none.
	Static []string `json:"static,omitempty"`
	// StaticCacheControl is the Cache-Control value of static responses
	// (e.g. "public, max-age=3600"). Default "": none sent.
	StaticCacheControl string `json:"static_cache_control,omitempty"`
	// StaticSymlinks is the policy for symlinks below a static mount:
	// follow, owner (only when link and target have the same owner) or
	// nofollow (403), like nginx's disable_symlinks. Default follow.
	StaticSymlinks string `json:"static_symlinks,omitempty"`
	// StaticFallthrough sends a static miss (no such file, a directory)
	// to the app instead of answering 404. Default off.
	StaticFallthrough bool `json:"static_fallthrough,omitempty"`
	// StaticIndex serves index.html for a static URL ending in "/".
	// Default off (no directory listing either way).
	StaticIndex bool `json:"static_index,omitempty"`
	// StaticMounts and StaticSymlinkPolicy are Static and StaticSymlinks
	// parsed, set by Validate.
	StaticMounts        []static.Mount  `json:"-"`
	StaticSymlinkPolicy static.Symlinks `json:"-"`

	// AdminBind is host:port of the admin listener (/livez, /readyz,
	// /metrics), or "off". Default 127.0.0.1:9191.
	AdminBind string `json:"admin_bind,omitempty"`
	// GracefulTimeout is how long in-flight requests may run after
	// SIGTERM/SIGINT before the worker exits anyway. Default 30s; 0:
	// none, the worker stops at once.
	GracefulTimeout time.Duration `json:"graceful_timeout,omitempty"`
	// TimeoutKeepAliveDrain is how long a stopping worker leaves an idle
	// kept-alive connection open (a lame-duck window, within
	// GracefulTimeout): a request arriving on it meanwhile is served with
	// "Connection: close" (RFC 9112 §9.6); then it is closed. 1s
	// (the table's); zero closes idle
	// connections at once.
	TimeoutKeepAliveDrain time.Duration `json:"timeout_keep_alive_drain,omitempty"`

	// ServerHeader sends "Server: turnstile" on responses that have no
	// Server field of their own (uvicorn's --server-header). Default off.
	ServerHeader bool `json:"server_header,omitempty"`
	// DateHeader sends the Date header (RFC 9110 §6.6.1). Default on (the
	// flag's default); the zero value is off (uvicorn's --no-date-header).
	DateHeader bool `json:"date_header,omitempty"`
	// Headers are added to every response, "Name: value" (or
	// "Name:value"), as uvicorn's --header. Default none.
	Headers []string `json:"headers,omitempty"`

	// LogLevel is debug, info, warning (or warn) or error (or critical),
	// in any case (gunicorn's DEBUG). Default info.
	LogLevel string `json:"log_level,omitempty"`
	// LogFormat is text or json. Default text.
	LogFormat string `json:"log_format,omitempty"`
	// AccessLog logs one line per request. Default off.
	AccessLog bool `json:"access_log,omitempty"`
	// AccessLogFormat is the access line in gunicorn's atoms
	// (internal/accesslog); "" keeps the record's fixed fields. Default "".
	AccessLogFormat string `json:"access_log_format,omitempty"`
	// LogConfig is a Python logging configuration file the workers apply
	// before they import the app (logconfig.go); "" for none. Default "".
	LogConfig string `json:"log_config,omitempty"`

	// LimitRequestLine is the longest request line in bytes (414 past
	// it). Default 8190.
	LimitRequestLine int `json:"limit_request_line,omitempty"`
	// LimitRequestFields is the most header fields (431). Default 100.
	LimitRequestFields int `json:"limit_request_fields,omitempty"`
	// LimitRequestFieldSize is the longest header field line in bytes
	// (431). Default 8190.
	LimitRequestFieldSize int `json:"limit_request_field_size,omitempty"`
	// LimitRequestBody is the largest request body in bytes (413).
	// Default 0: no limit.
	LimitRequestBody int64 `json:"limit_request_body,omitempty"`
	// LimitConcurrency is the most requests handled at once; more get
	// 503. Default 0: no limit.
	LimitConcurrency int `json:"limit_concurrency,omitempty"`

	// TimeoutRequestHeader runs from accept (or the end of the previous
	// response) to the end of the header section (408). Default 10s.
	TimeoutRequestHeader time.Duration `json:"timeout_request_header,omitempty"`
	// TimeoutKeepAlive is the idle time allowed between requests; more
	// than 0 (Validate).
	// Default 5s.
	TimeoutKeepAlive time.Duration `json:"timeout_keep_alive,omitempty"`
	// TimeoutBody is the longest gap between two reads of a request
	// body. Default 30s.
	TimeoutBody time.Duration `json:"timeout_body,omitempty"`
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second averaged over the body after a 5 s grace; slower gets 408.
	// Default 240 (the flag's default, Kestrel's); zero disables.
	MinBodyRate int `json:"min_body_rate,omitempty"`
	// RequestBufferBytes: a WSGI request body is read whole by Go before
	// the request enters the queue for a Python thread, so that a slow
	// upload holds a goroutine, never a pool thread (nginx's
	// proxy_request_buffering). Up to this many bytes of it are kept in
	// memory and handed to Python with the request; the rest is spooled
	// to an unlinked temporary file in RequestBufferDir that wsgi.input
	// reads back. Default 64 KiB (the flag's default); zero turns
	// buffering off: the app streams the body from the socket as it
	// arrives (Go reads at most 64 KiB ahead of it). ASGI bodies are never
	// buffered: receive() awaits without holding a thread.
	RequestBufferBytes int64 `json:"request_buffer_bytes,omitempty"`
	// RequestBufferDiskBytes bounds the body bytes the WSGI requests of a
	// worker spool to temporary files at once. A body that could never
	// fit (larger than RequestBufferBytes plus this) is answered 413; one
	// that does not fit while other uploads hold the room is answered
	// 503 with Retry-After. Both close the connection. Default 1 GiB (the
	// flag's default); zero spools nothing: a body larger than
	// RequestBufferBytes gets 413.
	RequestBufferDiskBytes int64 `json:"request_buffer_disk_bytes,omitempty"`
	// RequestBufferDir is the directory of the spool files (opened with
	// O_TMPFILE, so they have no name). Default "": os.TempDir()
	// ($TMPDIR, else /tmp).
	RequestBufferDir string `json:"request_buffer_dir,omitempty"`
	// TimeoutWrite is the longest one socket write may block on a slow
	// reader. Default 30s.
	TimeoutWrite time.Duration `json:"timeout_write,omitempty"`

	// TLS (internal/tlsconf): serving TLS needs SSLCertFiles and
	// SSLKeyFiles (PEM), as many of one as of the other, paired in order;
	// the first pair is the default, the others are chosen by SNI.
	// SSLKeyFilePassword decrypts the encrypted keys.
	// SSLCA is the PEM bundle verifying client certificates, used when
	// SSLClientVerify is optional or required (default none).
	// SSLMinVersion is 1.2 (default) or 1.3. SSLCiphers are the TLS 1.2
	// cipher suites, OpenSSL names separated by ':' (tlsconf.ParseCiphers);
	// default "": Mozilla's intermediate list (tlsconf.DefaultCipherSuites).
	SSLCertFiles       []string `json:"ssl_certfile,omitempty"`
	SSLKeyFiles        []string `json:"ssl_keyfile,omitempty"`
	SSLKeyFilePassword string   `json:"ssl_keyfile_password,omitempty"`
	SSLCA              string   `json:"ssl_ca,omitempty"`
	SSLClientVerify    string   `json:"ssl_client_verify,omitempty"`
	SSLMinVersion      string   `json:"ssl_min_version,omitempty"`
	SSLCiphers         string   `json:"ssl_ciphers,omitempty"`

	// HTTP is the protocol choice: auto (HTTP/1.1 and HTTP/2: h2 by ALPN
	// on TLS, h2c with prior knowledge on plain connections), 1 (HTTP/1.1
	// only) or 2 (HTTP/2 only). Default auto.
	HTTP string `json:"http,omitempty"`
	// HTTP/2 settings (internal/h2), named like Granian's. Zero takes
	// the default. MaxConcurrentStreams: streams per connection (200).
	// InitialConnectionWindowSize and InitialStreamWindowSize: receive
	// flow-control windows in bytes (1 MiB each, at least 65535).
	// MaxFrameSize: largest frame payload accepted, bytes (16384; up to
	// 16777215). MaxHeadersSize: SETTINGS_MAX_HEADER_LIST_SIZE, bytes
	// (64 KiB). KeepAliveInterval: PING after this long without a frame
	// (0: never); KeepAliveTimeout: close when the PING is unanswered
	// this long (20s).
	HTTP2MaxConcurrentStreams        uint32        `json:"http2_max_concurrent_streams,omitempty"`
	HTTP2InitialConnectionWindowSize int32         `json:"http2_initial_connection_window_size,omitempty"`
	HTTP2InitialStreamWindowSize     int32         `json:"http2_initial_stream_window_size,omitempty"`
	HTTP2MaxFrameSize                uint32        `json:"http2_max_frame_size,omitempty"`
	HTTP2MaxHeadersSize              int           `json:"http2_max_headers_size,omitempty"`
	HTTP2KeepAliveInterval           time.Duration `json:"http2_keep_alive_interval,omitempty"`
	HTTP2KeepAliveTimeout            time.Duration `json:"http2_keep_alive_timeout,omitempty"`
	// ACME (internal/acme): with ACMEDomains the TLS certificate is
	// obtained and renewed from the ACME CA at ACMECA (verified with the
	// ACMECARoot PEM bundle when set), for the account ACMEEmail, kept in
	// ACMEStorage; ACMEChallenge is tls-alpn-01, http-01 or any, HTTP-01
	// validations come to ACMEHTTPPort; renewal is checked every
	// ACMERenewCheck.
	ACMEDomains    []string      `json:"acme_domain,omitempty"`
	ACMEEmail      string        `json:"acme_email,omitempty"`
	ACMECA         string        `json:"acme_ca,omitempty"`
	ACMECARoot     string        `json:"acme_ca_root,omitempty"`
	ACMEStorage    string        `json:"acme_storage,omitempty"`
	ACMEChallenge  string        `json:"acme_challenge,omitempty"`
	ACMEHTTPPort   int           `json:"acme_http_port,omitempty"`
	ACMERenewCheck time.Duration `json:"acme_renew_check,omitempty"`
	// HTTP3 serves HTTP/3 on the TLS port over UDP (internal/h3), next to
	// HTTP/1.1 and HTTP/2 on TCP, whose responses advertise it (Alt-Svc,
	// for HTTP3AltSvcMaxAge). HTTP3MaxConcurrentStreams bounds the request
	// streams per connection; above HTTP3RetryAbove handshakes in progress
	// new ones get a QUIC Retry (0: always).
	HTTP3                     bool          `json:"http3,omitempty"`
	HTTP3MaxConcurrentStreams int           `json:"http3_max_concurrent_streams,omitempty"`
	HTTP3RetryAbove           int           `json:"http3_retry_above,omitempty"`
	HTTP3AltSvcMaxAge         time.Duration `json:"http3_alt_svc_max_age,omitempty"`
}

// TLS returns the TLS settings (NextProtos by HTTP).
func (c *Config) TLS() tlsconf.Config {
	protos := []string{"h2", "http/1.1"}
	switch c.HTTP {
	case "1":
		protos = []string{"http/1.1"}
	case "2":
		protos = []string{"h2"}
	}
	return tlsconf.Config{
		ACME:      len(c.ACMEDomains) > 0,
		CertFiles: c.SSLCertFiles, KeyFiles: c.SSLKeyFiles, KeyPassword: c.SSLKeyFilePassword,
		CAFile: c.SSLCA, ClientVerify: c.SSLClientVerify, MinVersion: c.SSLMinVersion,
		Ciphers: c.SSLCiphers, NextProtos: protos,
	}
}

// validateHTTP checks the TLS and HTTP/2 settings (files are read later,
// by tlsconf.Load).
func (c *Config) validateHTTP(bad func(string, ...any)) {
	switch c.HTTP {
	case "auto", "1", "2":
	default:
		bad("--http %q: want auto, 1 or 2", c.HTTP)
	}
	// "" is not a choice (tlsconf would take it as the default).
	if c.SSLClientVerify == "" {
		bad("--ssl-client-verify \"\": want none, optional or required")
	}
	if c.SSLMinVersion == "" {
		bad("--ssl-min-version \"\": want 1.2 or 1.3")
	}
	t := c.TLS()
	if err := t.Check(); err != nil {
		bad("%v", err)
	}
	if w := c.HTTP2InitialConnectionWindowSize; w < 65535 {
		bad("--http2-initial-connection-window-size %d: want 65535..2147483647", w)
	}
	// A client may send 65535 bytes of a stream before it has our
	// SETTINGS (RFC 9113 §6.9.2), so a smaller window breaks bodies.
	if w := c.HTTP2InitialStreamWindowSize; w < 65535 {
		bad("--http2-initial-stream-window-size %d: want 65535..2147483647", w)
	}
	if f := c.HTTP2MaxFrameSize; f < 16384 || f > 16777215 {
		bad("--http2-max-frame-size %d: want 16384..16777215", f)
	}
	if c.HTTP2MaxHeadersSize < 1 {
		bad("--http2-max-headers-size %d: want at least 1", c.HTTP2MaxHeadersSize)
	}
	if c.HTTP2KeepAliveInterval < 0 || c.HTTP2KeepAliveTimeout < 0 {
		bad("--http2-keep-alive-interval and --http2-keep-alive-timeout must not be negative")
	}
	if len(c.ACMEDomains) > 0 {
		switch c.ACMEChallenge {
		case "any", "tls-alpn-01", "http-01":
		default:
			bad("--acme-challenge %q: want tls-alpn-01, http-01 or any", c.ACMEChallenge)
		}
		if c.ACMEHTTPPort < 1 || c.ACMEHTTPPort > 65535 {
			bad("--acme-http-port %d: want 1..65535", c.ACMEHTTPPort)
		}
		if c.ACMERenewCheck <= 0 {
			bad("--acme-renew-check must be more than 0")
		}
		if c.UDS != "" {
			bad("--acme-domain needs a TCP port (TLS-ALPN-01 validations come to it), not --uds")
		}
	}
	if c.HTTP3 {
		if !t.Enabled() {
			bad("--http3 needs TLS: give --ssl-certfile and --ssl-keyfile, or --acme-domain (QUIC is always encrypted)")
		}
		if c.UDS != "" {
			bad("--http3 serves on a UDP port: it cannot go with --uds")
		}
		if c.HTTP3MaxConcurrentStreams < 1 {
			bad("--http3-max-concurrent-streams %d: want at least 1", c.HTTP3MaxConcurrentStreams)
		}
		if c.HTTP3RetryAbove < 0 {
			bad("--http3-retry-above %d: want 0 or more", c.HTTP3RetryAbove)
		}
		if c.HTTP3AltSvcMaxAge < time.Second {
			bad("--http3-alt-svc-max-age %s: want at least 1s", c.HTTP3AltSvcMaxAge)
		}
	}
}

// ApplyDefaults normalises what the flags, the environment and the file
// gave: --host given as "" is DefaultHost (127.0.0.1, not every
// interface), LogLevel is lower-cased (gunicorn's DEBUG), and
// ForwardedAllowIPs "" is DefaultForwardedAllowIPs. Any other string
// setting with choices given as "" (--log-level "", --admin-bind "") is
// left "" for Validate to refuse, naming the choices (issue 28). A
// number or a duration is never replaced: its 0 means what its usage
// says, or Validate refuses it.
func (c *Config) ApplyDefaults() {
	if c.Host == "" {
		c.Host = DefaultHost
	}
	c.LogLevel = strings.ToLower(c.LogLevel) // gunicorn and uvicorn take DEBUG, WARNING
	c.applyProxyDefaults()
}

// Validate reports every invalid field at once, after ApplyDefaults, and
// keeps the parsed form of the values it parses (StaticMounts,
// StaticSymlinkPolicy, TrustedProxies), so that nothing parses them again.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.App == "" {
		bad("an app is required: turnstile [flags] MODULE:ATTR")
	} else if err := checkApp(c.App); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.HeaderBlock(); err != nil {
		errs = append(errs, err)
	}
	switch c.Interface {
	case "auto", "wsgi", "asgi":
	default:
		bad("--interface %q: want auto, wsgi or asgi", c.Interface)
	}
	switch c.Lifespan {
	case "auto", "on", "off":
	default:
		bad("--lifespan %q: want auto, on or off", c.Lifespan)
	}
	switch c.Loop {
	case "auto", "asyncio", "uvloop":
	default:
		bad("--loop %q: want auto, asyncio or uvloop", c.Loop)
	}
	if c.Loops < 1 || c.Loops > MaxLoops {
		bad("--loops %d: want 1..%d", c.Loops, MaxLoops)
	}
	if c.ExecutorThreads < 1 || c.ExecutorThreads > 1024 {
		bad("--executor-threads %d: want 1..1024", c.ExecutorThreads)
	}
	if c.ChannelLayerMemoryBytes < 1<<20 {
		bad("--channel-layer-memory %d: want MiB, at least 1", c.ChannelLayerMemoryBytes>>20)
	}
	// Bounded by --channel-layer-memory only when that is valid itself: a
	// bad --channel-layer-memory is one error, not two.
	if c.ChannelLayerMaxMessage < 1 || (c.ChannelLayerMemoryBytes >= 1<<20 && c.ChannelLayerMaxMessage > c.ChannelLayerMemoryBytes) {
		bad("--channel-layer-max-message %d: want bytes, at least 1 and at most --channel-layer-memory", c.ChannelLayerMaxMessage)
	}
	if c.WSMaxSizeBytes < 1 {
		bad("--ws-max-size %d: want bytes, at least 1", c.WSMaxSizeBytes)
	}
	if c.WSMaxQueue < 1 || c.WSMaxQueue > 1<<16 {
		bad("--ws-max-queue %d: want 1..65536", c.WSMaxQueue)
	}
	if c.WSPingInterval < 0 {
		bad("--ws-ping-interval %s: must not be negative", c.WSPingInterval)
	}
	if c.WSPingTimeout < 0 {
		bad("--ws-ping-timeout %s: must not be negative", c.WSPingTimeout)
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("--port %d: want 0..65535", c.Port)
	}
	if c.BlockingThreads < 0 || c.BlockingThreads > 1024 {
		bad("--blocking-threads %d: want 0..1024 (0: off, ASGI only)", c.BlockingThreads)
	}
	if c.SessionThreads < 0 || c.SessionThreads > 1024 {
		bad("--session-threads %d: want 0..1024 (0: off)", c.SessionThreads)
	}
	if c.QueueSize < 1 {
		bad("--queue-size %d: want at least 1", c.QueueSize)
	}
	if c.Workers < 1 {
		bad("--workers %d: want at least 1", c.Workers)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"backlog", int64(c.Backlog)}, {"limit-request-line", int64(c.LimitRequestLine)}, {"limit-request-fields", int64(c.LimitRequestFields)},
		{"limit-request-field-size", int64(c.LimitRequestFieldSize)}, {"http2-max-concurrent-streams", int64(c.HTTP2MaxConcurrentStreams)}} {
		if n.v < 1 {
			bad("--%s %d: want at least 1", n.name, n.v)
		}
	}
	// A timer that bounds what a client holds (a connection, a read, a
	// write) has no off: 0 is refused rather than taken as the default.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout-request-header", c.TimeoutRequestHeader},
		{"timeout-body", c.TimeoutBody}, {"timeout-write", c.TimeoutWrite}, {"http2-keep-alive-timeout", c.HTTP2KeepAliveTimeout}} {
		if d.v == 0 {
			bad("--%s 0: want more than 0 (it has no off: a client could hold a connection for ever)", d.name)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", c.Timeout}, {"startup-timeout", c.StartupTimeout}, {"workers-lifetime", c.WorkersLifetime},
		{"graceful-timeout", c.GracefulTimeout}, {"timeout-request-header", c.TimeoutRequestHeader},
		{"timeout-keep-alive", c.TimeoutKeepAlive}, {"timeout-keep-alive-drain", c.TimeoutKeepAliveDrain},
		{"timeout-body", c.TimeoutBody}, {"timeout-write", c.TimeoutWrite},
		{"loop-stall-threshold", c.LoopStallThreshold}, {"slow-request-threshold", c.SlowRequestThreshold}} {
		if d.v < 0 {
			bad("--%s %s: must not be negative", d.name, d.v)
		}
	}
	// The watchdog looks every 10 ms and an idle loop turns only for its
	// probe (watchdog.MinStallThreshold): a shorter threshold would report
	// an idle loop as stalled.
	if c.LoopStallThreshold > 0 && c.LoopStallThreshold < 50*time.Millisecond {
		bad("--loop-stall-threshold %s: want 0 (off) or at least 50ms", c.LoopStallThreshold)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max-requests", int64(c.MaxRequests)}, {"max-requests-jitter", int64(c.MaxRequestsJitter)}, {"workers-max-rss", c.WorkersMaxRSSBytes >> 20}} {
		if n.v < 0 {
			bad("--%s %d: must not be negative", n.name, n.v)
		}
	}
	if _, _, err := c.UmaskValue(); err != nil {
		bad("--umask %q: %v", c.Umask, err)
	}
	if _, err := c.Credential(); err != nil {
		errs = append(errs, err)
	}
	// CPython keeps the interval in whole microseconds: a smaller value
	// would become 0. NaN fails every comparison, so it is named.
	if si := c.SwitchInterval; math.IsNaN(si) || si < 0 || (si > 0 && si < 1e-6) || si > 10 || (si == 0 && math.Signbit(si)) {
		bad("--switch-interval %g: want seconds in [0.000001, 10], or 0 for CPython's default (0.005)", si)
	}
	switch c.LogLevel {
	case "debug", "info", "warning", "warn", "error", "critical":
	default:
		bad("--log-level %q: want debug, info, warning or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("--log-format %q: want text or json", c.LogFormat)
	}
	if c.AccessLogFormat != "" {
		if _, err := accesslog.Compile(c.AccessLogFormat); err != nil {
			errs = append(errs, err)
		}
	}
	if c.LogConfig != "" {
		if err := CheckLogConfig(c.LogConfig); err != nil {
			errs = append(errs, err)
		}
	}
	mounted := map[string]string{} // URL prefix → the --static that mounts it
	c.StaticMounts = nil
	for _, m := range c.Static {
		mt, err := static.ParseMount(m)
		if err != nil {
			// "--static ..." first, so that the line names the
			// variable or the file key it came from (cliconf.Relabel).
			errs = append(errs, errors.New(strings.TrimPrefix(err.Error(), static.ErrMount.Error()+": ")))
			continue
		}
		if first, dup := mounted[mt.Prefix]; dup {
			bad("--static %q: URL prefix %s is already mounted by --static %q", m, mt.Prefix, first)
			continue
		}
		mounted[mt.Prefix] = m
		c.StaticMounts = append(c.StaticMounts, mt)
	}
	if pol, err := static.ParseSymlinks(c.StaticSymlinks); err != nil || c.StaticSymlinks == "" {
		bad("--static-symlinks %q: want follow, owner or nofollow", c.StaticSymlinks)
	} else {
		c.StaticSymlinkPolicy = pol
	}
	if strings.ContainsAny(c.StaticCacheControl, "\r\n\x00") {
		bad("--static-cache-control: must be one line")
	}
	if c.RootPath != "" && (!strings.HasPrefix(c.RootPath, "/") || strings.HasSuffix(c.RootPath, "/")) {
		bad("--root-path %q: want a path like /app (leading slash, no trailing slash)", c.RootPath)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"limit-request-body", c.LimitRequestBody},
		{"limit-concurrency", int64(c.LimitConcurrency)}, {"request-buffer", c.RequestBufferBytes},
		{"request-buffer-disk", c.RequestBufferDiskBytes}} {
		if n.v < 0 {
			bad("--%s %d: must not be negative", n.name, n.v)
		}
	}
	if c.RequestBufferBytes > MaxRequestBufferBytes {
		bad("--request-buffer %d: want bytes, 0..%d (64 MiB; a larger body spools to --request-buffer-dir)", c.RequestBufferBytes, int64(MaxRequestBufferBytes))
	}
	if d := c.RequestBufferDir; d != "" {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			bad("--request-buffer-dir %q: want an existing directory", d)
		} else if c.RequestBufferBytes > 0 && c.RequestBufferDiskBytes > 0 && !canCreateIn(d) {
			bad("--request-buffer-dir %q: cannot create a file there (spool files for request bodies)", d)
		}
	} else if c.RequestBufferBytes > 0 && c.RequestBufferDiskBytes > 0 && !canCreateIn(os.TempDir()) {
		bad("--request-buffer-dir: the default %q ($TMPDIR, else /tmp) cannot take a file; set TMPDIR or --request-buffer-dir", os.TempDir())
	}
	c.validateHTTP(bad)
	c.validateProxy(bad)
	c.validateAdminBind(bad)
	return errors.Join(errs...)
}

// checkApp checks MODULE:ATTR, with a hint for what gunicorn and uvicorn
// users type: a file name (app.py:app) or a bare module (gunicorn takes
// "app" as app:application; turnstile, like uvicorn, wants the attribute).
func checkApp(app string) error {
	m, a, ok := strings.Cut(app, ":")
	mod, dir := strings.TrimSuffix(m, ".py"), ""
	if i := strings.LastIndex(mod, "/"); i >= 0 {
		dir, mod = mod[:i], mod[i+1:]
	}
	give := mod // what to type instead
	if dir != "" {
		give = "--app-dir " + dir + " " + mod
	}
	switch {
	case mod == "" || strings.ContainsAny(mod, " \t"):
		return fmt.Errorf("app %q is not MODULE:ATTR", app)
	case !ok:
		return fmt.Errorf("app %q is not MODULE:ATTR: turnstile does not default the attribute (gunicorn would take %s:application; uvicorn, like turnstile, wants it): give %s:application or %s:app", app, mod, give, mod)
	case a == "":
		return fmt.Errorf("app %q is not MODULE:ATTR", app)
	case m != mod:
		return fmt.Errorf("app %q: MODULE is a module name, not a file: give %s:%s", app, give, a)
	}
	return nil
}

// HeaderBlock returns Headers as "Name: value\r\n" lines, checking each:
// a token name and a value with no control characters, not a header
// turnstile itself frames the response with.
func (c *Config) HeaderBlock() ([]byte, error) {
	var b []byte
	var errs []error
	for _, h := range c.Headers {
		name, value, ok := strings.Cut(h, ":")
		value = strings.Trim(value, " \t")
		if !ok || !isToken(name) {
			errs = append(errs, fmt.Errorf("--header %q: want NAME:VALUE, like X-Frame-Options:DENY", h))
			continue
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			errs = append(errs, fmt.Errorf("--header %q: the value must be one line, without control characters", h))
			continue
		}
		switch strings.ToLower(name) {
		case "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "proxy-connection", "date", "server":
			errs = append(errs, fmt.Errorf("--header %q: %s is turnstile's to send (see --date-header, --server-header)", h, name))
			continue
		}
		b = append(b, name+": "+value+"\r\n"...)
	}
	return b, errors.Join(errs...)
}

// isToken reports whether s is an RFC 9110 token (a field name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// UmaskValue parses Umask: the mask and true, or false when Umask is ""
// (leave the umask alone). Octal, with or without a 0 or 0o prefix, at
// most 0777.
func (c *Config) UmaskValue() (int, bool, error) {
	v := strings.TrimSpace(c.Umask)
	if v == "" {
		return 0, false, nil
	}
	digits := strings.TrimPrefix(strings.TrimPrefix(v, "0o"), "0O")
	if digits == "" {
		digits = "0"
	}
	n, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || n > 0o777 {
		return 0, false, fmt.Errorf("want an octal mask like 0o22 or 027 (at most 0777)")
	}
	return int(n), true, nil
}

// canCreateIn reports whether a file can be created in dir (it is removed
// at once): a directory that exists may still refuse one (/proc, a
// read-only mount), and every spooled upload would then get a 503.
func canCreateIn(dir string) bool {
	f, err := os.CreateTemp(dir, ".turnstile-check-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}
