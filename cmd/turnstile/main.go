// Command turnstile serves a Python WSGI app (ASGI: see README) from an
// embedded CPython. It only parses flags and wires packages together.
//
//	turnstile [flags] MODULE:ATTR
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"turnstile/internal/config"
	"turnstile/internal/python"
	"turnstile/internal/server"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg config.Config
	code := 0
	cmd := &cobra.Command{
		Use:   "turnstile [flags] MODULE:ATTR",
		Short: "An application server for Python web apps, written in Go",
		Long: "turnstile serves a WSGI app (PEP 3333) from CPython " + python.BuildMinor + " embedded in this binary.\n" +
			"Go owns the sockets and parsers; Python threads only run the app.",
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "0.1.0 (CPython " + python.BuildVersion + ")",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.App = args[0]
			cfg.ApplyDefaults()
			if err := cfg.Validate(); err != nil {
				return err
			}
			log := server.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
			code = server.Run(&cfg, log)
			return nil
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&cfg.Host, "host", config.DefaultHost, "bind to this host")
	f.IntVar(&cfg.Port, "port", config.DefaultPort, "bind to this port (0 = any free port)")
	f.StringVar(&cfg.UDS, "uds", "", "bind to this Unix socket instead of host:port")
	f.IntVar(&cfg.Backlog, "backlog", config.DefaultBacklog, "listen backlog (connections)")
	f.BoolVar(&cfg.Factory, "factory", false, "treat MODULE:ATTR as a factory to call for the app")
	f.StringVar(&cfg.Interface, "interface", "auto", "app interface: auto, wsgi or asgi")
	f.StringVar(&cfg.AppDir, "app-dir", "", "directory put first on sys.path (default: current directory)")
	f.StringVar(&cfg.Venv, "venv", "", "virtualenv to run the app in (default: $VIRTUAL_ENV)")
	f.StringVar(&cfg.RootPath, "root-path", "", "path prefix the app is mounted at (SCRIPT_NAME)")
	f.IntVar(&cfg.BlockingThreads, "blocking-threads", config.DefaultBlockingThreads, "Python threads running WSGI requests")
	f.IntVar(&cfg.BlockingThreads, "threads", config.DefaultBlockingThreads, "alias of --blocking-threads")
	f.IntVar(&cfg.QueueSize, "queue-size", config.DefaultQueueSize, "requests that may wait for a Python thread; more get 503")
	f.DurationVar(&cfg.QueueTimeout, "queue-timeout", config.DefaultQueueTimeout, "longest wait for a Python thread before 503 (negative: no limit)")
	f.Float64Var(&cfg.SwitchInterval, "switch-interval", 0, "sys.setswitchinterval in seconds (0: CPython's 0.005)")
	f.IntVar(&cfg.Workers, "workers", 1, "worker processes (only 1 is supported so far)")
	f.StringVar(&cfg.AdminBind, "admin-bind", config.DefaultAdminBind, "admin listener host:port for /livez /readyz /metrics, or off")
	f.DurationVar(&cfg.GracefulTimeout, "graceful-timeout", config.DefaultGracefulTimeout, "time in-flight requests get after SIGTERM/SIGINT")
	f.StringVar(&cfg.LogLevel, "log-level", "info", "debug, info, warning or error")
	f.StringVar(&cfg.LogFormat, "log-format", "text", "text or json")
	f.BoolVar(&cfg.AccessLog, "access-log", false, "log one line per request")
	f.IntVar(&cfg.LimitRequestLine, "limit-request-line", config.DefaultLimitRequestLine, "longest request line in bytes (414)")
	f.IntVar(&cfg.LimitRequestFields, "limit-request-fields", config.DefaultLimitRequestFields, "most header fields (431)")
	f.IntVar(&cfg.LimitRequestFieldSize, "limit-request-field-size", config.DefaultLimitRequestFieldSize, "longest header field in bytes (431)")
	f.Int64Var(&cfg.LimitRequestBody, "limit-request-body", 0, "largest request body in bytes (413; 0 = no limit)")
	f.IntVar(&cfg.LimitConcurrency, "limit-concurrency", 0, "most requests handled at once; more get 503 (0 = no limit)")
	f.DurationVar(&cfg.TimeoutRequestHeader, "timeout-request-header", config.DefaultTimeoutRequestHeader, "time from accept to the end of the request head (408)")
	f.DurationVar(&cfg.TimeoutKeepAlive, "timeout-keep-alive", config.DefaultTimeoutKeepAlive, "idle time allowed between requests")
	f.DurationVar(&cfg.TimeoutBody, "timeout-body", config.DefaultTimeoutBody, "longest gap between reads of a request body")
	f.DurationVar(&cfg.TimeoutWrite, "timeout-write", config.DefaultTimeoutWrite, "longest a socket write may block on a slow reader")

	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "turnstile:", err)
		return 2
	}
	return code
}
