package config

// The settings table (issue 19): each setting is defined once, here, with
// its name, kind (and so its unit), default, one-line doc and aliases.
// From it come the command's flags (Register), and through the flag set
// the TURNSTILE_* variables and the TOML keys (internal/cliconf), the
// report of `turnstile check`, and the README's flag table, which a test
// (settings_test.go) holds to it.

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"turnstile/internal/http1"
	"turnstile/internal/proxy"
)

// Kind is how a setting's value is written, and so its Go type.
type Kind int

const (
	String   Kind = iota // string
	Int                  // int
	Int64                // int64
	Int32                // int32
	Uint32               // uint32
	Float                // float64
	Bool                 // bool
	Seconds              // time.Duration: seconds ("30", "2.5") or a Go duration ("30s", "1m")
	Duration             // time.Duration: a Go duration only ("100ms")
	List                 // []string: repeatable
	MiB                  // int64 bytes, written in MiB (--workers-max-rss)
)

// Setting is one row of the table.
type Setting struct {
	Name    string // the flag's name, without "--"
	Short   string // its one-letter shorthand, or ""
	Kind    Kind
	Default string // the default as the flag writes it; "" for none (a List, a string)
	Usage   string // the one-line doc of --help
	Aliases []Alias
	// Negation, when set, is the usage of --no-NAME (a Bool only): one
	// setting under two names (internal/cliconf).
	Negation string
	// Refused, when set, is the line that says what turnstile does
	// instead of this gunicorn or uvicorn flag: hidden, and giving it
	// exits 2 (cmd/turnstile, refuse).
	Refused string
	// Field is where the value goes; nil for a flag that is not kept in
	// Config (a refused one).
	Field func(*Config) any
	// README is the setting's Default cell in the README's flag table
	// when it is not what ReadmeDefault derives from Default.
	README string
}

// Alias is another name of a setting: gunicorn's or uvicorn's.
type Alias struct {
	Name  string
	Short string
	Whose string // "gunicorn's name", "uvicorn's name; seconds", or ""
}

// Usage is the alias's --help line; internal/cliconf knows an alias by
// its "alias of --X" start.
func (a Alias) Usage(of string) string {
	if a.Whose == "" {
		return "alias of --" + of
	}
	return "alias of --" + of + " (" + a.Whose + ")"
}

func ptr[T any](p *T) any { return p }

// Settings is the table, in --help order. A default that a package's
// own zero value needs as well (internal/http1's, like net/http's
// "Default: 10s when zero") is that package's constant; the Default*
// constants of this package are the ones cmd/turnstile needs too.
var Settings = []Setting{
	{Name: "config", Short: "c", Kind: String, Usage: "TOML file of settings (keys are flag names; also $TURNSTILE_CONFIG)", README: "`$TURNSTILE_CONFIG`",
		Field: func(c *Config) any { return ptr(&c.ConfigFile) }},
	{Name: "bind", Short: "b", Kind: List, Usage: "gunicorn's address: HOST:PORT, HOST (port 8000), [IPV6]:PORT or unix:PATH; one only, instead of --host/--port/--uds",
		Field: func(c *Config) any { return ptr(&c.Bind) }},
	{Name: "host", Kind: String, Default: DefaultHost, Usage: "bind to this host", Field: func(c *Config) any { return ptr(&c.Host) }},
	{Name: "port", Kind: Int, Default: strconv.Itoa(DefaultPort), Usage: "bind to this port (0 = any free port)", Field: func(c *Config) any { return ptr(&c.Port) }},
	{Name: "uds", Kind: String, Usage: "bind to this Unix socket instead of host:port", Field: func(c *Config) any { return ptr(&c.UDS) }},
	{Name: "backlog", Kind: Int, Default: "2048", Usage: "listen backlog (connections)", Field: func(c *Config) any { return ptr(&c.Backlog) }},
	{Name: "factory", Kind: Bool, Default: "false", Usage: "treat MODULE:ATTR as a factory to call for the app", Field: func(c *Config) any { return ptr(&c.Factory) }},
	{Name: "interface", Kind: String, Default: "auto", Usage: "app interface: auto, wsgi or asgi", Field: func(c *Config) any { return ptr(&c.Interface) }},
	{Name: "app-dir", Kind: String, Usage: "directory put first on sys.path (default: current directory)", README: "current dir", Field: func(c *Config) any { return ptr(&c.AppDir) }},
	{Name: "chdir", Kind: String, Usage: "change to this directory before anything else, as gunicorn does: the app's current directory, the default --app-dir, and the base of relative paths",
		Field: func(c *Config) any { return ptr(&c.Chdir) }},
	{Name: "env-file", Kind: String, Usage: "dotenv file (KEY=VALUE lines) whose variables the app sees in os.environ; variables already set win, as in uvicorn",
		Field: func(c *Config) any { return ptr(&c.EnvFile) }},
	{Name: "venv", Kind: String, Usage: "virtualenv to run the app in (default: $VIRTUAL_ENV)", README: "`$VIRTUAL_ENV`", Field: func(c *Config) any { return ptr(&c.Venv) }},
	{Name: "root-path", Kind: String, Usage: "path prefix the app is mounted at (SCRIPT_NAME)", Field: func(c *Config) any { return ptr(&c.RootPath) }},
	{Name: "proxy-headers", Kind: Bool, Default: "true", Usage: "from --forwarded-allow-ips peers, take the client, scheme and host from X-Forwarded-* / Forwarded",
		Negation: "ignore X-Forwarded-* and Forwarded (same as --proxy-headers=false)", Field: func(c *Config) any { return ptr(&c.ProxyHeaders) }},
	{Name: "forwarded-allow-ips", Kind: String, Default: proxy.DefaultAllowIPs, Usage: "trusted proxies: comma-separated IPs and CIDRs, or * (the default is $FORWARDED_ALLOW_IPS when it is set)",
		README: "`$FORWARDED_ALLOW_IPS`, else `127.0.0.1,::1`", Field: func(c *Config) any { return ptr(&c.ForwardedAllowIPs) }},
	{Name: "proxy-protocol", Kind: Bool, Default: "false", Usage: "require a PROXY protocol v1/v2 header from --forwarded-allow-ips peers (TCP load balancers)", Field: func(c *Config) any { return ptr(&c.ProxyProtocol) }},
	{Name: "blocking-threads", Kind: Int, Default: strconv.Itoa(DefaultBlockingThreads), Usage: "Python threads running WSGI requests; under ASGI, the threads running the sync code of HTTP requests through asgiref (Django's sync views), at most this many at once (0 = off, ASGI only: a thread per request, as under uvicorn)", Aliases: []Alias{{Name: "threads"}},
		Field: func(c *Config) any { return ptr(&c.BlockingThreads) }},
	{Name: "session-threads", Kind: Int, Default: strconv.Itoa(DefaultSessionThreads), Usage: "ASGI: Python threads running the sync code of WebSocket sessions through asgiref (Channels consumers, djust), each session pinned to one for its life; 4 overlaps database waits while keeping (4 + --blocking-threads) DB connections per worker (0 = off: asgiref's one thread, shared by every session, as under uvicorn)",
		Field: func(c *Config) any { return ptr(&c.SessionThreads) }},
	{Name: "queue-size", Kind: Int, Default: "1024", Usage: "requests that may wait for a Python thread; more get 503", Field: func(c *Config) any { return ptr(&c.QueueSize) }},
	{Name: "queue-timeout", Kind: Seconds, Default: "30s", Usage: "longest wait for a Python thread before 503 (seconds or a duration; 0 = no limit)", Field: func(c *Config) any { return ptr(&c.QueueTimeout) }},
	{Name: "lifespan", Kind: String, Default: "auto", Usage: "ASGI lifespan: auto, on or off", Field: func(c *Config) any { return ptr(&c.Lifespan) }},
	{Name: "loops", Kind: Int, Default: "1", Usage: "ASGI: event loops per worker, each on its own Python thread (ts-loop-N); a new connection goes to the loop with the fewest requests and sessions in flight that is not stalled (1..64)",
		Field: func(c *Config) any { return ptr(&c.Loops) }},
	{Name: "loop", Kind: String, Default: "auto", Usage: "ASGI event loop: auto (uvloop if installed), asyncio or uvloop", Field: func(c *Config) any { return ptr(&c.Loop) }},
	{Name: "executor-threads", Kind: Int, Default: "8", Usage: "threads of the default executor (asyncio.to_thread) of an ASGI worker, shared by its --loops", Field: func(c *Config) any { return ptr(&c.ExecutorThreads) }},
	{Name: "ws-max-size", Kind: Int64, Default: strconv.Itoa(16 << 20), Usage: "largest WebSocket message in bytes; larger closes with 1009", README: "16777216 (16 MiB)",
		Field: func(c *Config) any { return ptr(&c.WSMaxSizeBytes) }},
	{Name: "channel-layer-memory", Kind: MiB, Default: "256", Usage: "MiB of channel layer messages (turnstile.channels.ChannelLayer) a worker may hold queued, every channel together; a send past it raises LayerMemoryFull (a ChannelFull)",
		Field: func(c *Config) any { return ptr(&c.ChannelLayerMemoryBytes) }},
	{Name: "channel-layer-max-message", Kind: Int64, Default: strconv.Itoa(1 << 20), Usage: "largest channel layer message in bytes (msgpack); a larger send raises ValueError", README: "1048576 (1 MiB)",
		Field: func(c *Config) any { return ptr(&c.ChannelLayerMaxMessage) }},
	{Name: "ws-max-queue", Kind: Int, Default: "32", Usage: "WebSocket messages that may wait for the app's receive() before reading pauses", Field: func(c *Config) any { return ptr(&c.WSMaxQueue) }},
	{Name: "ws-ping-interval", Kind: Seconds, Default: "20s", Usage: "ping WebSocket clients this often (seconds or a duration; 0 = never)", Field: func(c *Config) any { return ptr(&c.WSPingInterval) }},
	{Name: "ws-ping-timeout", Kind: Seconds, Default: "20s", Usage: "close a WebSocket whose pong is this late with 1011 (seconds or a duration; 0 = never)", Field: func(c *Config) any { return ptr(&c.WSPingTimeout) }},
	{Name: "ws-per-message-deflate", Kind: Bool, Default: "true", Usage: "negotiate permessage-deflate with WebSocket clients (--ws-per-message-deflate=false: off)",
		Field: func(c *Config) any { return ptr(&c.WSPerMessageDeflate) }},
	{Name: "loop-stall-threshold", Kind: Duration, Default: "100ms", Usage: "log the stack of an event loop blocked this long (0: off)", Field: func(c *Config) any { return ptr(&c.LoopStallThreshold) }},
	{Name: "slow-request-threshold", Kind: Duration, Default: "10s", Usage: "log the stack of a WSGI request, or of an ASGI app's sync call on turnstile's pools, running this long (0: off)", Field: func(c *Config) any { return ptr(&c.SlowRequestThreshold) }},
	{Name: "switch-interval", Kind: Float, Default: "0", Usage: "sys.setswitchinterval in seconds (0: CPython's 0.005)", README: "CPython's 0.005", Field: func(c *Config) any { return ptr(&c.SwitchInterval) }},
	{Name: "workers", Short: "w", Kind: Int, Default: "1", Usage: "worker processes, each with its own CPython, under a master", Field: func(c *Config) any { return ptr(&c.Workers) }},
	{Name: "startup-timeout", Kind: Seconds, Default: "2m0s", Usage: "longest a worker may take to import the app and serve (seconds or a duration; 0 = no limit)", README: "120s",
		Field: func(c *Config) any { return ptr(&c.StartupTimeout) }},
	{Name: "timeout", Short: "t", Kind: Seconds, Default: "0s", Usage: "a worker stuck this long is logged and replaced gracefully: a WSGI request running (not queued) this long, or an ASGI event loop not turning this long, or an ASGI app's sync call on turnstile's pools running this long (seconds or a duration; 0 = off)",
		Field: func(c *Config) any { return ptr(&c.Timeout) }},
	{Name: "max-requests", Kind: Int, Default: "0", Usage: "replace a worker after this many requests (0 = never)", Aliases: []Alias{{Name: "limit-max-requests", Whose: "uvicorn's name"}},
		Field: func(c *Config) any { return ptr(&c.MaxRequests) }},
	{Name: "max-requests-jitter", Kind: Int, Default: "0", Usage: "add a random 0..N to --max-requests per worker", Field: func(c *Config) any { return ptr(&c.MaxRequestsJitter) }},
	{Name: "workers-lifetime", Kind: Seconds, Default: "0s", Usage: "replace a worker this long after it started serving (seconds or a duration; 0 = never)", Field: func(c *Config) any { return ptr(&c.WorkersLifetime) }},
	{Name: "workers-max-rss", Kind: MiB, Default: "0", Usage: "replace a worker whose resident memory exceeds this many MiB (0 = no limit)", Field: func(c *Config) any { return ptr(&c.WorkersMaxRSSBytes) }},
	{Name: "reload", Kind: Bool, Default: "false", Usage: "restart the workers when a .py file under --app-dir changes (development)", Field: func(c *Config) any { return ptr(&c.Reload) }},
	{Name: "reload-include", Kind: List, Usage: "also reload on files matching this glob (repeatable)", Field: func(c *Config) any { return ptr(&c.ReloadInclude) }},
	{Name: "pid-file", Kind: String, Usage: "write the master's pid to this file", Field: func(c *Config) any { return ptr(&c.PidFile) }},
	{Name: "user", Kind: String, Usage: "run the workers as this user (name or uid), after binding; the master stays root", Field: func(c *Config) any { return ptr(&c.User) }},
	{Name: "group", Kind: String, Usage: "run the workers as this group (name or gid; default: --user's group)", README: "the user's", Field: func(c *Config) any { return ptr(&c.Group) }},
	{Name: "umask", Kind: String, Usage: "octal umask the master sets before creating sockets and files, e.g. 0o22 (default: inherited)", README: "inherited", Field: func(c *Config) any { return ptr(&c.Umask) }},
	{Name: "static", Kind: List, Usage: "serve files of DIR at URL_PREFIX in Go, before the app: URL_PREFIX=DIR (repeatable)", Field: func(c *Config) any { return ptr(&c.Static) }},
	{Name: "static-cache-control", Kind: String, Usage: "Cache-Control of static responses, e.g. \"public, max-age=3600\" (default: none)", README: "none",
		Field: func(c *Config) any { return ptr(&c.StaticCacheControl) }},
	{Name: "static-symlinks", Kind: String, Default: "follow", Usage: "symlinks below a static mount: follow, owner (same owner only) or nofollow (403)", Field: func(c *Config) any { return ptr(&c.StaticSymlinks) }},
	{Name: "static-fallthrough", Kind: Bool, Default: "false", Usage: "send a static miss to the app instead of answering 404", Field: func(c *Config) any { return ptr(&c.StaticFallthrough) }},
	{Name: "static-index", Kind: Bool, Default: "false", Usage: "serve index.html for a static URL ending in /", Field: func(c *Config) any { return ptr(&c.StaticIndex) }},
	{Name: "admin-bind", Kind: String, Default: DefaultAdminBind, Usage: "admin listener for /livez /readyz /metrics /debug/stalls /debug/status and the ctl endpoints: host:port, unix:/path (a Unix socket) or off", Field: func(c *Config) any { return ptr(&c.AdminBind) }},
	{Name: "graceful-timeout", Kind: Seconds, Default: "30s", Usage: "time in-flight requests get after SIGTERM/SIGINT (seconds or a duration; 0 = none: stop at once)",
		Aliases: []Alias{{Name: "timeout-graceful-shutdown", Whose: "uvicorn's name"}}, Field: func(c *Config) any { return ptr(&c.GracefulTimeout) }},
	{Name: "log-level", Kind: String, Default: "info", Usage: "debug, info, warning or error (any case; warn and critical are taken too)", Field: func(c *Config) any { return ptr(&c.LogLevel) }},
	{Name: "log-format", Kind: String, Default: "text", Usage: "text or json", Field: func(c *Config) any { return ptr(&c.LogFormat) }},
	{Name: "access-log", Kind: Bool, Default: "false", Usage: "log one line per request (to stderr, with the other records)", Field: func(c *Config) any { return ptr(&c.AccessLog) }},
	{Name: "access-log-format", Kind: String, Usage: "the access line in gunicorn's atoms, e.g. '%(h)s %(l)s %(u)s %(t)s \"%(r)s\" %(s)s %(b)s' (plus queue_wait_us, gil_wait_us, worker, loop, thread); turns --access-log on; under --log-format json the atoms' fields (default: the record's fixed fields)",
		README: "none", Aliases: []Alias{{Name: "access-logformat", Whose: "gunicorn's name"}}, Field: func(c *Config) any { return ptr(&c.AccessLogFormat) }},
	{Name: "log-config", Kind: String, Usage: "a Python logging configuration for the app's logging, applied in each worker before the app is imported: dictConfig as JSON (.json), YAML (.yaml, .yml; needs PyYAML) or a fileConfig .ini file",
		README: "none", Field: func(c *Config) any { return ptr(&c.LogConfig) }},
	{Name: "server-header", Kind: Bool, Default: "false", Usage: "send \"Server: turnstile\" (not on a response that has its own Server)",
		Negation: "send no Server header (same as --server-header=false)", Field: func(c *Config) any { return ptr(&c.ServerHeader) }},
	{Name: "date-header", Kind: Bool, Default: "true", Usage: "send the Date header",
		Negation: "send no Date header (same as --date-header=false)", Field: func(c *Config) any { return ptr(&c.DateHeader) }},
	{Name: "header", Kind: List, Usage: "add NAME:VALUE to every response, as uvicorn's --header (repeatable)", Field: func(c *Config) any { return ptr(&c.Headers) }},
	{Name: "limit-request-line", Kind: Int, Default: strconv.Itoa(http1.DefaultMaxRequestLineBytes), Usage: "longest request line in bytes (414)", Field: func(c *Config) any { return ptr(&c.LimitRequestLine) }},
	{Name: "limit-request-fields", Kind: Int, Default: strconv.Itoa(http1.DefaultMaxHeaderFields), Usage: "most header fields (431)", Field: func(c *Config) any { return ptr(&c.LimitRequestFields) }},
	{Name: "limit-request-field-size", Kind: Int, Default: strconv.Itoa(http1.DefaultMaxHeaderFieldBytes), Usage: "longest header field in bytes (431)", Field: func(c *Config) any { return ptr(&c.LimitRequestFieldSize) }},
	{Name: "limit-request-body", Kind: Int64, Default: "0", Usage: "largest request body in bytes (413; 0 = no limit)", README: "0 (none)", Field: func(c *Config) any { return ptr(&c.LimitRequestBody) }},
	{Name: "limit-concurrency", Kind: Int, Default: "0", Usage: "most requests handled at once; more get 503 (0 = no limit)", README: "0 (none)", Field: func(c *Config) any { return ptr(&c.LimitConcurrency) }},
	{Name: "timeout-request-header", Kind: Seconds, Default: http1.DefaultHeaderTimeout.String(), Usage: "time from accept to the end of the request head (408; seconds or a duration, more than 0)",
		Field: func(c *Config) any { return ptr(&c.TimeoutRequestHeader) }},
	{Name: "timeout-keep-alive", Kind: Seconds, Default: http1.DefaultKeepAliveTimeout.String(), Usage: "idle time allowed between requests (seconds or a duration; 0 = no keep-alive: each HTTP/1.1 response closes its connection)",
		Aliases: []Alias{{Name: "keep-alive", Whose: "gunicorn's name; seconds"}}, Field: func(c *Config) any { return ptr(&c.TimeoutKeepAlive) }},
	{Name: "timeout-keep-alive-drain", Kind: Seconds, Default: "1s", Usage: "when a worker stops, idle kept-alive connections stay open this long (within --graceful-timeout); a request on one is served with Connection: close (0 = close at once)",
		Field: func(c *Config) any { return ptr(&c.TimeoutKeepAliveDrain) }},
	{Name: "timeout-body", Kind: Seconds, Default: http1.DefaultBodyTimeout.String(), Usage: "longest gap between reads of a request body (seconds or a duration, more than 0)", Field: func(c *Config) any { return ptr(&c.TimeoutBody) }},
	{Name: "min-body-rate", Kind: Int, Default: strconv.Itoa(http1.DefaultMinBodyRate), Usage: "slowest request body in bytes/s after a 5 s grace; slower gets 408 (0: off)", Field: func(c *Config) any { return ptr(&c.MinBodyRate) }},
	{Name: "request-buffer", Kind: Int64, Default: strconv.Itoa(64 << 10), Usage: "bytes of a WSGI request body Go holds in memory; the body is read whole before the app runs, the rest spooled to a temp file (0: off, the app streams the body)",
		README: "65536 (64 KiB)", Field: func(c *Config) any { return ptr(&c.RequestBufferBytes) }},
	{Name: "request-buffer-disk", Kind: Int64, Default: strconv.Itoa(1 << 30), Usage: "bytes of WSGI request bodies spooled to temp files at once; a body that can never fit gets 413, one that does not fit now 503",
		README: "1073741824 (1 GiB)", Field: func(c *Config) any { return ptr(&c.RequestBufferDiskBytes) }},
	{Name: "request-buffer-dir", Kind: String, Usage: "directory of the spool files (default: $TMPDIR, else /tmp)", README: "`$TMPDIR`, else `/tmp`", Field: func(c *Config) any { return ptr(&c.RequestBufferDir) }},
	{Name: "timeout-write", Kind: Seconds, Default: http1.DefaultWriteTimeout.String(), Usage: "longest a socket write may block on a slow reader (seconds or a duration, more than 0)", Field: func(c *Config) any { return ptr(&c.TimeoutWrite) }},
	{Name: "ssl-certfile", Kind: List, Usage: "PEM certificate chain: serve TLS (with --ssl-keyfile); repeatable, paired in order with --ssl-keyfile, chosen by SNI, the first the default",
		Aliases: []Alias{{Name: "certfile", Whose: "gunicorn's name"}}, Field: func(c *Config) any { return ptr(&c.SSLCertFiles) }},
	{Name: "ssl-keyfile", Kind: List, Usage: "PEM private key, possibly encrypted (PKCS#8 or legacy PEM); repeatable, one per --ssl-certfile", Aliases: []Alias{{Name: "keyfile", Whose: "gunicorn's name"}},
		Field: func(c *Config) any { return ptr(&c.SSLKeyFiles) }},
	{Name: "ssl-keyfile-password", Kind: String, Usage: "password of the encrypted --ssl-keyfile keys", Field: func(c *Config) any { return ptr(&c.SSLKeyFilePassword) }},
	{Name: "ssl-ca", Kind: String, Usage: "PEM bundle of the CAs that sign client certificates (mTLS; used under --ssl-client-verify optional or required)",
		Aliases: []Alias{{Name: "ssl-ca-certs", Whose: "uvicorn's name"}, {Name: "ca-certs", Whose: "gunicorn's name"}}, Field: func(c *Config) any { return ptr(&c.SSLCA) }},
	{Name: "ssl-client-verify", Kind: String, Default: "none", Usage: "client certificates: none, optional or required (needs --ssl-ca)", Field: func(c *Config) any { return ptr(&c.SSLClientVerify) }},
	{Name: "ssl-min-version", Kind: String, Default: "1.2", Usage: "lowest TLS version: 1.2 or 1.3", Field: func(c *Config) any { return ptr(&c.SSLMinVersion) }},
	{Name: "ssl-ciphers", Kind: String, Usage: "TLS 1.2 cipher suites, OpenSSL names separated by ':' (default: Mozilla intermediate, ECDHE with AES-GCM or CHACHA20-POLY1305)",
		README: "Mozilla intermediate", Aliases: []Alias{{Name: "ciphers", Whose: "gunicorn's name"}}, Field: func(c *Config) any { return ptr(&c.SSLCiphers) }},
	{Name: "acme-domain", Kind: List, Usage: "obtain and renew the TLS certificate for this name from an ACME CA (repeatable; instead of --ssl-certfile)", Field: func(c *Config) any { return ptr(&c.ACMEDomains) }},
	{Name: "acme-email", Kind: String, Usage: "contact address of the ACME account", Field: func(c *Config) any { return ptr(&c.ACMEEmail) }},
	{Name: "acme-ca", Kind: String, Default: "https://acme-v02.api.letsencrypt.org/directory", Usage: "ACME directory URL of the CA", README: "Let's Encrypt", Field: func(c *Config) any { return ptr(&c.ACMECA) }},
	{Name: "acme-ca-root", Kind: String, Usage: "PEM bundle to verify the ACME CA's HTTPS server with (a private CA; default: the system's roots)", Field: func(c *Config) any { return ptr(&c.ACMECARoot) }},
	{Name: "acme-storage", Kind: String, Usage: "directory of the certificates, keys, account and locks, shared by the workers (default: $XDG_DATA_HOME/certmagic, else ~/.local/share/certmagic)",
		README: "`~/.local/share/certmagic`", Field: func(c *Config) any { return ptr(&c.ACMEStorage) }},
	{Name: "acme-challenge", Kind: String, Default: "any", Usage: "challenges to answer: tls-alpn-01 (on the TLS port), http-01 (on --acme-http-port) or any", Field: func(c *Config) any { return ptr(&c.ACMEChallenge) }},
	{Name: "acme-http-port", Kind: Int, Default: "80", Usage: "port HTTP-01 validations come to (listened on for the time of a challenge)", Field: func(c *Config) any { return ptr(&c.ACMEHTTPPort) }},
	{Name: "acme-renew-check", Kind: Seconds, Default: "10m0s", Usage: "how often certificates are checked for renewal (renewed with a third of their lifetime left)", README: "10m", Field: func(c *Config) any { return ptr(&c.ACMERenewCheck) }},
	{Name: "http", Kind: String, Default: "auto", Usage: "protocols: auto (HTTP/1.1 and HTTP/2: h2 by ALPN, h2c by prior knowledge), 1 or 2", Field: func(c *Config) any { return ptr(&c.HTTP) }},
	{Name: "http2-max-concurrent-streams", Kind: Uint32, Default: "200", Usage: "HTTP/2 streams open at once per connection", Field: func(c *Config) any { return ptr(&c.HTTP2MaxConcurrentStreams) }},
	{Name: "http2-initial-connection-window-size", Kind: Int32, Default: strconv.Itoa(1 << 20), Usage: "HTTP/2 connection receive window in bytes",
		Field: func(c *Config) any { return ptr(&c.HTTP2InitialConnectionWindowSize) }},
	{Name: "http2-initial-stream-window-size", Kind: Int32, Default: strconv.Itoa(1 << 20), Usage: "HTTP/2 stream receive window in bytes (SETTINGS_INITIAL_WINDOW_SIZE)",
		Field: func(c *Config) any { return ptr(&c.HTTP2InitialStreamWindowSize) }},
	{Name: "http2-max-frame-size", Kind: Uint32, Default: "16384", Usage: "largest HTTP/2 frame payload accepted in bytes (16384..16777215)", Field: func(c *Config) any { return ptr(&c.HTTP2MaxFrameSize) }},
	{Name: "http2-max-headers-size", Kind: Int, Default: strconv.Itoa(64 << 10), Usage: "HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE in bytes", Field: func(c *Config) any { return ptr(&c.HTTP2MaxHeadersSize) }},
	{Name: "http2-keep-alive-interval", Kind: Seconds, Default: "0s", Usage: "send an HTTP/2 PING after this long without a frame (seconds or a duration; 0 = never)",
		Field: func(c *Config) any { return ptr(&c.HTTP2KeepAliveInterval) }},
	{Name: "http2-keep-alive-timeout", Kind: Seconds, Default: "20s", Usage: "close an HTTP/2 connection whose PING is unanswered this long (seconds or a duration, more than 0)",
		Field: func(c *Config) any { return ptr(&c.HTTP2KeepAliveTimeout) }},
	{Name: "http3", Kind: Bool, Default: "false", Usage: "also serve HTTP/3 (QUIC) on the TLS port over UDP, advertised by Alt-Svc (needs --ssl-certfile)", Field: func(c *Config) any { return ptr(&c.HTTP3) }},
	{Name: "http3-max-concurrent-streams", Kind: Int, Default: "100", Usage: "HTTP/3 request streams open at once per connection", Field: func(c *Config) any { return ptr(&c.HTTP3MaxConcurrentStreams) }},
	{Name: "http3-retry-above", Kind: Int, Default: "64", Usage: "QUIC handshakes in progress above which a new one must first answer a Retry (address validation; 0 = always)",
		Field: func(c *Config) any { return ptr(&c.HTTP3RetryAbove) }},
	{Name: "http3-alt-svc-max-age", Kind: Seconds, Default: "24h0m0s", README: "24h", Usage: "how long clients may remember the Alt-Svc advertisement of HTTP/3 (seconds or a duration, more than 0)",
		Field: func(c *Config) any { return ptr(&c.HTTP3AltSvcMaxAge) }},

	// gunicorn's and uvicorn's flags turnstile has no use for: hidden,
	// each refused with the one line that says what it does instead.
	{Name: "preload", Kind: Bool, Refused: "not needed: each worker is its own process that imports the app itself (re-executed, its own CPython, no fork after import), so there is nothing to share copy-on-write; an idle hello worker is 27 MiB RSS, 18 MiB of it file pages (binary, libpython, stdlib) the workers already share"},
	{Name: "daemon", Short: "D", Kind: Bool, Refused: "not supported: turnstile stays in the foreground; run it under systemd (Type=notify, see the README, \"Deployment\"), a container or supervisord"},
	{Name: "worker-class", Short: "k", Kind: String, Refused: "not needed: turnstile tells WSGI from ASGI itself (--interface), runs WSGI views on --blocking-threads Python threads and an ASGI app on one event loop per worker (--loop uvloop, as uvicorn's workers); there are no gevent or eventlet workers"},
	{Name: "access-logfile", Kind: String, Refused: "a file is not supported: --access-logfile - (or --access-log) logs each request to stderr with the other records (one stream, not gunicorn's stdout) for journald or the container to collect"},
	{Name: "error-logfile", Kind: String, Refused: "turnstile logs to stderr only (gunicorn's default, \"-\"): redirect it, or let journald or the container collect it"},
	{Name: "log-file", Kind: String, Refused: "turnstile logs to stderr only (gunicorn's default, \"-\"): redirect it, or let journald or the container collect it"},
	{Name: "no-access-log", Kind: Bool, Refused: "not needed: the access log is off by default (--access-log=false)"},
	{Name: "ssl-cert-reqs", Kind: String, Refused: "use --ssl-client-verify none, optional or required (uvicorn's 0, 1 and 2)"},
	{Name: "env", Short: "e", Kind: List, Refused: "not supported: set the variable in the environment, or put KEY=VALUE lines in a file for --env-file"},
	{Name: "ws", Kind: String, Refused: "not needed: turnstile's WebSocket is built in (Go frames it; see --ws-max-size, --ws-ping-interval, --ws-per-message-deflate)"},
	{Name: "fd", Kind: String, Refused: "not supported: turnstile takes a socket from systemd socket activation (LISTEN_FDS, see the README, \"Deployment\") or binds --uds / --host and --port itself"},
	{Name: "reload-dir", Kind: List, Refused: "not supported: --reload watches .py files under --app-dir; add other files with --reload-include GLOB"},
}

// Lookup returns the setting named name (not an alias), or nil.
func Lookup(name string) *Setting {
	for i := range Settings {
		if Settings[i].Name == name {
			return &Settings[i]
		}
	}
	return nil
}

// RefusedLines maps each refused flag to its line.
func RefusedLines() map[string]string {
	m := map[string]string{}
	for _, s := range Settings {
		if s.Refused != "" {
			m[s.Name] = s.Refused
		}
	}
	return m
}

// Register adds every setting of the table to fs, its aliases and its
// --no-X, each bound to its field of c, which it sets to the default.
// Refused flags are hidden. It panics on a default that does not parse
// (a mistake in the table, caught by the package's tests).
func Register(fs *pflag.FlagSet, c *Config) {
	for i := range Settings {
		s := &Settings[i]
		var p any
		if s.Field != nil {
			p = s.Field(c)
		}
		register(fs, s, s.Name, s.Short, s.Usage, p)
		for _, a := range s.Aliases {
			register(fs, s, a.Name, a.Short, a.Usage(s.Name), p)
		}
		if s.Negation != "" {
			fs.Var(negated{p.(*bool)}, "no-"+s.Name, s.Negation)
			fs.Lookup("no-" + s.Name).NoOptDefVal = "true"
			deferrable(fs, "no-"+s.Name)
		}
		if s.Refused != "" {
			fs.MarkHidden(s.Name)
		}
	}
}

// Defaults returns a Config with every setting at its default.
func Defaults() Config {
	var c Config
	Register(pflag.NewFlagSet("defaults", pflag.ContinueOnError), &c)
	return c
}

// register adds one name of setting s to fs, bound to p (a new variable
// when p is nil).
func register(fs *pflag.FlagSet, s *Setting, name, short, usage string, p any) {
	def := s.Default
	must := func(err error) {
		if err != nil {
			panic(fmt.Sprintf("config: setting %s: default %q: %v", s.Name, def, err))
		}
	}
	switch s.Kind {
	case String:
		if p == nil {
			p = new(string)
		}
		fs.StringVarP(p.(*string), name, short, def, usage)
	case Int:
		if p == nil {
			p = new(int)
		}
		n, err := strconv.Atoi(orZero(def))
		must(err)
		fs.IntVarP(p.(*int), name, short, n, usage)
	case Int64:
		n, err := strconv.ParseInt(orZero(def), 10, 64)
		must(err)
		fs.Int64VarP(p.(*int64), name, short, n, usage)
	case Int32:
		n, err := strconv.ParseInt(orZero(def), 10, 32)
		must(err)
		fs.Int32VarP(p.(*int32), name, short, int32(n), usage)
	case Uint32:
		n, err := strconv.ParseUint(orZero(def), 10, 32)
		must(err)
		fs.Uint32VarP(p.(*uint32), name, short, uint32(n), usage)
	case Float:
		f, err := strconv.ParseFloat(orZero(def), 64)
		must(err)
		fs.Float64VarP(p.(*float64), name, short, f, usage)
	case Bool:
		if p == nil {
			p = new(bool)
		}
		b, err := strconv.ParseBool(orFalse(def))
		must(err)
		fs.BoolVarP(p.(*bool), name, short, b, usage)
	case Seconds:
		v := secondsValue{p.(*time.Duration)}
		must(v.Set(orZero(def)))
		fs.VarP(v, name, short, usage)
	case Duration:
		d, err := time.ParseDuration(orZero(def))
		must(err)
		fs.DurationVarP(p.(*time.Duration), name, short, d, usage)
	case List:
		if p == nil {
			p = new([]string)
		}
		fs.StringArrayVarP(p.(*[]string), name, short, nil, usage)
	case MiB:
		v := mibValue{p.(*int64)}
		must(v.Set(orZero(def)))
		fs.VarP(v, name, short, usage)
	default:
		panic("config: setting " + s.Name + ": unknown kind")
	}
	if s.Kind != String && s.Kind != List { // their Set never fails
		deferrable(fs, name)
	}
}

// deferredValue is a flag's value whose Set, while deferring, records a
// bad value and returns nil, so that pflag goes on parsing the command
// line after it (pflag stops at the first error): every bad value is
// then reported at once (ValueErrors), one line each, with Validate's.
type deferredValue struct {
	pflag.Value
	deferring bool
	bad       *BadValue
}

// BadValue is a value of the command line that its flag could not take.
type BadValue struct {
	Flag  *pflag.Flag // the flag as given: an alias, a --no-X
	Value string
	Err   error // the flag value's own error (strconv's, time's, "want ...")
	seq   int
}

var badSeq int // orders the bad values as given

func (d *deferredValue) Set(v string) error {
	old := d.Value.String()
	err := d.Value.Set(v)
	if err == nil {
		return nil
	}
	// pflag's numbers store what they parsed even on error (0 for
	// "abc"): keep the value as it was, so that Validate does not
	// report the 0 as well.
	d.Value.Set(old)
	if !d.deferring {
		return err
	}
	if d.bad == nil { // the first bad value of a flag given twice
		badSeq++
		d.bad = &BadValue{Value: v, Err: err, seq: badSeq}
	}
	return nil
}

// deferrable wraps flag name's value in a deferredValue (not deferring
// yet: see DeferValueErrors).
func deferrable(fs *pflag.FlagSet, name string) {
	f := fs.Lookup(name)
	f.Value = &deferredValue{Value: f.Value}
}

// DeferValueErrors makes the bad values given to fs's settings wait for
// ValueErrors instead of stopping the parse at the first.
func DeferValueErrors(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if d, ok := f.Value.(*deferredValue); ok {
			d.deferring = true
		}
	})
}

// ValueErrors returns the bad values recorded since DeferValueErrors, in
// the order given, and stops deferring: a later Set (the environment's,
// the file's: internal/cliconf) returns its error again.
func ValueErrors(fs *pflag.FlagSet) []BadValue {
	var out []BadValue
	fs.VisitAll(func(f *pflag.Flag) {
		if d, ok := f.Value.(*deferredValue); ok {
			d.deferring = false
			if d.bad != nil {
				b := *d.bad
				b.Flag = f
				out = append(out, b)
			}
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

func orFalse(s string) string {
	if s == "" {
		return "false"
	}
	return s
}

// secondsValue is a duration flag that also takes a bare number of
// seconds, as gunicorn's --timeout does: "30", "2.5", "30s", "1m".
type secondsValue struct{ d *time.Duration }

func (s secondsValue) String() string {
	if s.d == nil {
		return "0s"
	}
	return s.d.String()
}

func (s secondsValue) Set(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		// NaN, the infinities and more seconds than a Duration holds
		// (about 292 years) would wrap to a negative duration.
		if math.IsNaN(f) || math.Abs(f) >= float64(math.MaxInt64)/float64(time.Second) {
			return fmt.Errorf("want seconds or a duration like 30s")
		}
		*s.d = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want seconds or a duration like 30s")
	}
	*s.d = d
	return nil
}

func (s secondsValue) Type() string { return "seconds" }

// mibValue is an int64 number of bytes written in MiB.
type mibValue struct{ b *int64 }

func (m mibValue) String() string {
	if m.b == nil {
		return "0"
	}
	return strconv.FormatInt(*m.b>>20, 10)
}

func (m mibValue) Set(v string) error {
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil || n > math.MaxInt64>>20 || n < math.MinInt64>>20 {
		return fmt.Errorf("want a whole number of MiB")
	}
	*m.b = n << 20
	return nil
}

func (m mibValue) Type() string { return "int64" }

// negated is a boolean flag that sets *b to its opposite: --no-X for a
// flag --X that defaults to true.
type negated struct{ b *bool }

func (n negated) String() string {
	if n.b == nil {
		return "false"
	}
	return strconv.FormatBool(!*n.b)
}

func (n negated) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*n.b = !on
	return nil
}

func (n negated) Type() string     { return "bool" }
func (n negated) IsBoolFlag() bool { return true }

// zeroMeaning finds what a usage says 0 means: "(0 = off)", "(...; 0 =
// no limit)", "(0: CPython's 0.005)".
var zeroMeaning = regexp.MustCompile(`\b0(?: =|:) ([^;)]+)\)`)

// ZeroMeaning returns what 0 means for s, from its usage ("off", "no
// limit"), or "".
func (s *Setting) ZeroMeaning() string {
	if m := zeroMeaning.FindStringSubmatch(s.Usage); m != nil {
		return m[1]
	}
	return ""
}

// ReadmeDefault is s's Default cell in the README's flag table: README
// when set, else on or off for a boolean, the `value` of a string, the
// number or duration, with what 0 means.
func (s *Setting) ReadmeDefault() string {
	if s.README != "" {
		return s.README
	}
	switch s.Kind {
	case Bool:
		if s.Default == "true" {
			return "on"
		}
		return "off"
	case List:
		return ""
	case String:
		if s.Default == "" {
			return ""
		}
		return "`" + s.Default + "`"
	}
	if s.Default == "0" || s.Default == "0s" {
		if z := s.ZeroMeaning(); z != "" {
			return "0 (" + z + ")"
		}
		return "0"
	}
	return s.Default
}
