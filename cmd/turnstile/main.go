// Command turnstile serves a Python WSGI app (ASGI: see README) from an
// embedded CPython. It only parses flags and wires packages together.
//
//	turnstile [flags] MODULE:ATTR
package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"turnstile/internal/cliconf"
	"turnstile/internal/config"
	"turnstile/internal/logs"
	"turnstile/internal/python"
	"turnstile/internal/server"
	"turnstile/internal/supervise"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg config.Config
	var maxRSSMiB int64
	code := 0
	cmd := &cobra.Command{
		Use:   "turnstile [flags] MODULE:ATTR",
		Short: "An application server for Python web apps, written in Go",
		Long: "turnstile serves a WSGI (PEP 3333) or ASGI 3.0 app from CPython " + python.BuildMinor + " embedded in this binary.\n" +
			"Go owns the sockets and parsers; Python threads only run the app.",
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "0.1.0 (CPython " + python.BuildVersion + ")",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := loadConfig(cmd, &cfg, &maxRSSMiB, args[0])
			if err != nil {
				return err
			}
			// The master never initialises Python: it re-executes this
			// binary for each worker, with TURNSTILE_WORKER set, and hands
			// down the settings it took from the environment and the file.
			if server.IsWorker() {
				// The settings (which may hold --ssl-keyfile-password)
				// are read: take them and the password's own variable
				// out of the environment before Python copies it into
				// os.environ, where the app and its subprocesses would
				// see them. os.Unsetenv calls C unsetenv (cgo).
				// TURNSTILE_WORKER and TURNSTILE_WORKER_ADMIN were
				// taken out at start (internal/server, init).
				os.Unsetenv(cliconf.EnvSettings)
				os.Unsetenv(cliconf.EnvName("ssl-keyfile-password"))
				code = server.RunWorker(&cfg, logs.New(os.Stderr, cfg.LogLevel, cfg.LogFormat))
			} else {
				os.Setenv(cliconf.EnvSettings, res.Export())
				code = supervise.Run(&cfg, os.Stderr)
			}
			return nil
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.Flags().SortFlags = false
	// Every flag is persistent: `turnstile check` takes the same ones.
	f := cmd.PersistentFlags()
	f.SortFlags = false
	f.StringP("config", "c", "", "TOML file of settings (keys are flag names; also $TURNSTILE_CONFIG)")
	f.StringArrayP("bind", "b", nil, "gunicorn's address: HOST:PORT, HOST (port 8000), [IPV6]:PORT or unix:PATH; one only, instead of --host/--port/--uds")
	f.StringVar(&cfg.Host, "host", config.DefaultHost, "bind to this host")
	f.IntVar(&cfg.Port, "port", config.DefaultPort, "bind to this port (0 = any free port)")
	f.StringVar(&cfg.UDS, "uds", "", "bind to this Unix socket instead of host:port")
	f.IntVar(&cfg.Backlog, "backlog", config.DefaultBacklog, "listen backlog (connections)")
	f.BoolVar(&cfg.Factory, "factory", false, "treat MODULE:ATTR as a factory to call for the app")
	f.StringVar(&cfg.Interface, "interface", "auto", "app interface: auto, wsgi or asgi")
	f.StringVar(&cfg.AppDir, "app-dir", "", "directory put first on sys.path (default: current directory)")
	f.String("chdir", "", "change to this directory before anything else, as gunicorn does: the app's current directory, the default --app-dir, and the base of relative paths")
	f.String("env-file", "", "dotenv file (KEY=VALUE lines) whose variables the app sees in os.environ; variables already set win, as in uvicorn")
	f.StringVar(&cfg.Venv, "venv", "", "virtualenv to run the app in (default: $VIRTUAL_ENV)")
	f.StringVar(&cfg.RootPath, "root-path", "", "path prefix the app is mounted at (SCRIPT_NAME)")
	f.BoolVar(&cfg.ProxyHeaders, "proxy-headers", true, "from --forwarded-allow-ips peers, take the client, scheme and host from X-Forwarded-* / Forwarded")
	f.Var(negated{&cfg.ProxyHeaders}, "no-proxy-headers", "ignore X-Forwarded-* and Forwarded (same as --proxy-headers=false)")
	f.Lookup("no-proxy-headers").NoOptDefVal = "true"
	f.StringVar(&cfg.ForwardedAllowIPs, "forwarded-allow-ips", config.DefaultForwardedAllowIPs(), "trusted proxies: comma-separated IPs and CIDRs, or * (the default is $FORWARDED_ALLOW_IPS when it is set)")
	f.BoolVar(&cfg.ProxyProtocol, "proxy-protocol", false, "require a PROXY protocol v1/v2 header from --forwarded-allow-ips peers (TCP load balancers)")
	f.IntVar(&cfg.BlockingThreads, "blocking-threads", config.DefaultBlockingThreads, "Python threads running WSGI requests")
	f.IntVar(&cfg.BlockingThreads, "threads", config.DefaultBlockingThreads, "alias of --blocking-threads")
	f.IntVar(&cfg.QueueSize, "queue-size", config.DefaultQueueSize, "requests that may wait for a Python thread; more get 503")
	f.Var(seconds(&cfg.QueueTimeout, config.DefaultQueueTimeout), "queue-timeout", "longest wait for a Python thread before 503 (negative: no limit)")
	f.StringVar(&cfg.Lifespan, "lifespan", "auto", "ASGI lifespan: auto, on or off")
	f.StringVar(&cfg.Loop, "loop", "auto", "ASGI event loop: auto (uvloop if installed), asyncio or uvloop")
	f.IntVar(&cfg.ExecutorThreads, "executor-threads", config.DefaultExecutorThreads, "threads of the ASGI loop's default executor (asyncio.to_thread)")
	f.Int64Var(&cfg.WSMaxSizeBytes, "ws-max-size", config.DefaultWSMaxSizeBytes, "largest WebSocket message in bytes; larger closes with 1009")
	f.IntVar(&cfg.WSMaxQueue, "ws-max-queue", config.DefaultWSMaxQueue, "WebSocket messages that may wait for the app's receive() before reading pauses")
	f.Var(seconds(&cfg.WSPingInterval, config.DefaultWSPingInterval), "ws-ping-interval", "ping WebSocket clients this often (seconds or a duration; 0 = never)")
	f.Var(seconds(&cfg.WSPingTimeout, config.DefaultWSPingTimeout), "ws-ping-timeout", "close a WebSocket whose pong is this late with 1011 (seconds or a duration; 0 = never)")
	f.BoolVar(&cfg.WSPerMessageDeflate, "ws-per-message-deflate", true, "negotiate permessage-deflate with WebSocket clients (--ws-per-message-deflate=false: off)")
	f.DurationVar(&cfg.LoopStallThreshold, "loop-stall-threshold", config.DefaultLoopStallThreshold, "log the stack of an event loop blocked this long (0: off)")
	f.DurationVar(&cfg.SlowRequestThreshold, "slow-request-threshold", config.DefaultSlowRequestThreshold, "log the stack of a WSGI request running this long (0: off)")
	f.Float64Var(&cfg.SwitchInterval, "switch-interval", 0, "sys.setswitchinterval in seconds (0: CPython's 0.005)")
	f.IntVarP(&cfg.Workers, "workers", "w", 1, "worker processes, each with its own CPython, under a master")
	f.Var(seconds(&cfg.StartupTimeout, config.DefaultStartupTimeout), "startup-timeout", "longest a worker may take to import the app and serve (seconds or a duration)")
	f.VarP(seconds(&cfg.Timeout, 0), "timeout", "t", "a worker stuck this long is logged and replaced gracefully: a WSGI request running (not queued) this long, or an ASGI event loop not turning this long (seconds or a duration; 0 = off)")
	f.IntVar(&cfg.MaxRequests, "max-requests", 0, "replace a worker after this many requests (0 = never)")
	f.IntVar(&cfg.MaxRequests, "limit-max-requests", 0, "alias of --max-requests (uvicorn's name)")
	f.IntVar(&cfg.MaxRequestsJitter, "max-requests-jitter", 0, "add a random 0..N to --max-requests per worker")
	f.Var(seconds(&cfg.WorkersLifetime, 0), "workers-lifetime", "replace a worker this long after it started serving (seconds or a duration; 0 = never)")
	f.Int64Var(&maxRSSMiB, "workers-max-rss", 0, "replace a worker whose resident memory exceeds this many MiB (0 = no limit)")
	f.BoolVar(&cfg.Reload, "reload", false, "restart the workers when a .py file under --app-dir changes (development)")
	f.StringArrayVar(&cfg.ReloadInclude, "reload-include", nil, "also reload on files matching this glob (repeatable)")
	f.StringVar(&cfg.PidFile, "pid-file", "", "write the master's pid to this file")
	f.StringVar(&cfg.User, "user", "", "run the workers as this user (name or uid), after binding; the master stays root")
	f.StringVar(&cfg.Group, "group", "", "run the workers as this group (name or gid; default: --user's group)")
	f.StringVar(&cfg.Umask, "umask", "", "octal umask the master sets before creating sockets and files, e.g. 0o22 (default: inherited)")
	f.StringArrayVar(&cfg.Static, "static", nil, "serve files of DIR at URL_PREFIX in Go, before the app: URL_PREFIX=DIR (repeatable)")
	f.StringVar(&cfg.StaticCacheControl, "static-cache-control", "", "Cache-Control of static responses, e.g. \"public, max-age=3600\" (default: none)")
	f.StringVar(&cfg.StaticSymlinks, "static-symlinks", "follow", "symlinks below a static mount: follow, owner (same owner only) or nofollow (403)")
	f.BoolVar(&cfg.StaticFallthrough, "static-fallthrough", false, "send a static miss to the app instead of answering 404")
	f.BoolVar(&cfg.StaticIndex, "static-index", false, "serve index.html for a static URL ending in /")
	f.StringVar(&cfg.AdminBind, "admin-bind", config.DefaultAdminBind, "admin listener for /livez /readyz /metrics /debug/stalls: host:port, unix:/path (a Unix socket) or off")
	f.Var(seconds(&cfg.GracefulTimeout, config.DefaultGracefulTimeout), "graceful-timeout", "time in-flight requests get after SIGTERM/SIGINT")
	f.Var(seconds(&cfg.GracefulTimeout, config.DefaultGracefulTimeout), "timeout-graceful-shutdown", "alias of --graceful-timeout (uvicorn's name)")
	f.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warning or error (any case; warn and critical are taken too)")
	f.StringVar(&cfg.LogFormat, "log-format", "text", "text or json")
	f.BoolVar(&cfg.AccessLog, "access-log", false, "log one line per request")
	f.BoolVar(&cfg.ServerHeader, "server-header", false, "send \"Server: turnstile\" (not on a response that has its own Server)")
	f.Var(negated{&cfg.ServerHeader}, "no-server-header", "send no Server header (same as --server-header=false)")
	f.Lookup("no-server-header").NoOptDefVal = "true"
	f.BoolVar(&cfg.DateHeader, "date-header", true, "send the Date header")
	f.Var(negated{&cfg.DateHeader}, "no-date-header", "send no Date header (same as --date-header=false)")
	f.Lookup("no-date-header").NoOptDefVal = "true"
	f.StringArrayVar(&cfg.Headers, "header", nil, "add NAME:VALUE to every response, as uvicorn's --header (repeatable)")
	f.IntVar(&cfg.LimitRequestLine, "limit-request-line", config.DefaultLimitRequestLine, "longest request line in bytes (414)")
	f.IntVar(&cfg.LimitRequestFields, "limit-request-fields", config.DefaultLimitRequestFields, "most header fields (431)")
	f.IntVar(&cfg.LimitRequestFieldSize, "limit-request-field-size", config.DefaultLimitRequestFieldSize, "longest header field in bytes (431)")
	f.Int64Var(&cfg.LimitRequestBody, "limit-request-body", 0, "largest request body in bytes (413; 0 = no limit)")
	f.IntVar(&cfg.LimitConcurrency, "limit-concurrency", 0, "most requests handled at once; more get 503 (0 = no limit)")
	f.Var(seconds(&cfg.TimeoutRequestHeader, config.DefaultTimeoutRequestHeader), "timeout-request-header", "time from accept to the end of the request head (408)")
	f.Var(seconds(&cfg.TimeoutKeepAlive, config.DefaultTimeoutKeepAlive), "timeout-keep-alive", "idle time allowed between requests")
	f.Var(seconds(&cfg.TimeoutKeepAlive, config.DefaultTimeoutKeepAlive), "keep-alive", "alias of --timeout-keep-alive (gunicorn's name; seconds)")
	f.Var(seconds(&cfg.TimeoutKeepAliveDrain, config.DefaultTimeoutKeepAliveDrain), "timeout-keep-alive-drain", "when a worker stops, idle kept-alive connections stay open this long (within --graceful-timeout); a request on one is served with Connection: close (0 = close at once)")
	f.Var(seconds(&cfg.TimeoutBody, config.DefaultTimeoutBody), "timeout-body", "longest gap between reads of a request body")
	f.IntVar(&cfg.MinBodyRate, "min-body-rate", 240, "slowest request body in bytes/s after a 5 s grace; slower gets 408 (0: off)")
	f.Int64Var(&cfg.RequestBufferBytes, "request-buffer", config.DefaultRequestBufferBytes, "bytes of a WSGI request body Go holds in memory; the body is read whole before the app runs, the rest spooled to a temp file (0: off, the app streams the body)")
	f.Int64Var(&cfg.RequestBufferDiskBytes, "request-buffer-disk", config.DefaultRequestBufferDisk, "bytes of WSGI request bodies spooled to temp files at once; a body that can never fit gets 413, one that does not fit now 503")
	f.StringVar(&cfg.RequestBufferDir, "request-buffer-dir", "", "directory of the spool files (default: $TMPDIR, else /tmp)")
	f.Var(seconds(&cfg.TimeoutWrite, config.DefaultTimeoutWrite), "timeout-write", "longest a socket write may block on a slow reader")
	f.StringVar(&cfg.SSLCertFile, "ssl-certfile", "", "PEM certificate chain: serve TLS (with --ssl-keyfile)")
	f.StringVar(&cfg.SSLKeyFile, "ssl-keyfile", "", "PEM private key, possibly encrypted (PKCS#8 or legacy PEM)")
	f.StringVar(&cfg.SSLCertFile, "certfile", "", "alias of --ssl-certfile (gunicorn's name)")
	f.StringVar(&cfg.SSLKeyFile, "keyfile", "", "alias of --ssl-keyfile (gunicorn's name)")
	f.StringVar(&cfg.SSLKeyFilePassword, "ssl-keyfile-password", "", "password of an encrypted --ssl-keyfile")
	f.StringVar(&cfg.SSLCA, "ssl-ca", "", "PEM bundle of the CAs that sign client certificates (mTLS)")
	f.StringVar(&cfg.SSLCA, "ssl-ca-certs", "", "alias of --ssl-ca (uvicorn's name)")
	f.StringVar(&cfg.SSLCA, "ca-certs", "", "alias of --ssl-ca (gunicorn's name)")
	f.StringVar(&cfg.SSLClientVerify, "ssl-client-verify", "none", "client certificates: none, optional or required (needs --ssl-ca)")
	f.StringVar(&cfg.SSLMinVersion, "ssl-min-version", "1.2", "lowest TLS version: 1.2 or 1.3")
	f.StringVar(&cfg.SSLCiphers, "ssl-ciphers", "", "TLS 1.2 cipher suites, OpenSSL names separated by ':' (default: Mozilla intermediate, ECDHE with AES-GCM or CHACHA20-POLY1305)")
	f.StringVar(&cfg.SSLCiphers, "ciphers", "", "alias of --ssl-ciphers (gunicorn's name)")
	f.StringVar(&cfg.HTTP, "http", "auto", "protocols: auto (HTTP/1.1 and HTTP/2: h2 by ALPN, h2c by prior knowledge), 1 or 2")
	f.Uint32Var(&cfg.HTTP2MaxConcurrentStreams, "http2-max-concurrent-streams", config.DefaultHTTP2MaxConcurrentStreams, "HTTP/2 streams open at once per connection")
	f.Int32Var(&cfg.HTTP2InitialConnectionWindowSize, "http2-initial-connection-window-size", config.DefaultHTTP2InitialConnectionWindowSize, "HTTP/2 connection receive window in bytes")
	f.Int32Var(&cfg.HTTP2InitialStreamWindowSize, "http2-initial-stream-window-size", config.DefaultHTTP2InitialStreamWindowSize, "HTTP/2 stream receive window in bytes (SETTINGS_INITIAL_WINDOW_SIZE)")
	f.Uint32Var(&cfg.HTTP2MaxFrameSize, "http2-max-frame-size", config.DefaultHTTP2MaxFrameSize, "largest HTTP/2 frame payload accepted in bytes (16384..16777215)")
	f.IntVar(&cfg.HTTP2MaxHeadersSize, "http2-max-headers-size", config.DefaultHTTP2MaxHeadersSize, "HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE in bytes")
	f.Var(seconds(&cfg.HTTP2KeepAliveInterval, 0), "http2-keep-alive-interval", "send an HTTP/2 PING after this long without a frame (seconds or a duration; 0 = never)")
	f.Var(seconds(&cfg.HTTP2KeepAliveTimeout, config.DefaultHTTP2KeepAliveTimeout), "http2-keep-alive-timeout", "close an HTTP/2 connection whose PING is unanswered this long (seconds or a duration)")

	// gunicorn's and uvicorn's flags turnstile has no use for: hidden,
	// each refused with one line (refused, in check.go).
	f.Bool("preload", false, "")
	f.BoolP("daemon", "D", false, "")
	f.StringP("worker-class", "k", "", "")
	f.String("access-logfile", "", "")
	f.String("error-logfile", "", "")
	f.String("log-file", "", "")
	for name := range refused {
		f.MarkHidden(name)
	}
	cmd.SetFlagErrorFunc(flagError)

	cmd.AddCommand(checkCommand(&cfg, &maxRSSMiB, &code))
	cmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print turnstile's version and its CPython's (as --version)",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Println("turnstile version " + cmd.Version)
		},
	})

	if err := cmd.Execute(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "turnstile:", line)
		}
		return 2
	}
	return code
}

// secondsValue is a duration flag that also takes a bare number of
// seconds, as gunicorn's --timeout does: "30", "2.5", "30s", "1m".
type secondsValue struct{ d *time.Duration }

func seconds(d *time.Duration, def time.Duration) secondsValue {
	*d = def
	return secondsValue{d}
}

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
