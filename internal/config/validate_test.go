package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

// valid is the defaults with an app: a Config Validate accepts.
func valid(t *testing.T) Config {
	t.Helper()
	c := Defaults()
	c.App = "app:app"
	c.ApplyDefaults()
	return c
}

// Validate refuses each bad value with a line naming the flag; rows are
// one change to a valid Config and a part of the error the user sees.
func TestValidate_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"no app", func(c *Config) { c.App = "" }, "an app is required"},
		{"app without attribute", func(c *Config) { c.App = "app" }, "give app:application or app:app"},
		{"app as a file", func(c *Config) { c.App = "src/app.py:app" }, "give --app-dir src app:app"},
		{"interface", func(c *Config) { c.Interface = "rsgi" }, `--interface "rsgi": want auto, wsgi or asgi`},
		{"lifespan", func(c *Config) { c.Lifespan = "yes" }, `--lifespan "yes"`},
		{"loop", func(c *Config) { c.Loop = "trio" }, `--loop "trio"`},

		{"port", func(c *Config) { c.Port = 65536 }, "--port 65536: want 0..65535"},
		{"blocking threads", func(c *Config) { c.BlockingThreads = -1 }, "--blocking-threads -1: want 0..1024"},
		{"executor threads", func(c *Config) { c.ExecutorThreads = 1025 }, "--executor-threads 1025"},
		{"loops zero", func(c *Config) { c.Loops = 0 }, "--loops 0: want 1..64"},
		{"loops negative", func(c *Config) { c.Loops = -2 }, "--loops -2: want 1..64"},
		{"loops above cap", func(c *Config) { c.Loops = 65 }, "--loops 65: want 1..64"},
		{"queue size", func(c *Config) { c.QueueSize = 0 }, "--queue-size 0: want at least 1"},
		{"workers", func(c *Config) { c.Workers = 0 }, "--workers 0"},
		{"backlog", func(c *Config) { c.Backlog = 0 }, "--backlog 0: want at least 1"},

		{"write timeout has no off", func(c *Config) { c.TimeoutWrite = 0 }, "--timeout-write 0: want more than 0"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "--timeout -1s: must not be negative"},
		{"stall threshold under the probe", func(c *Config) { c.LoopStallThreshold = 10 * time.Millisecond }, "--loop-stall-threshold 10ms: want 0 (off) or at least 50ms"},
		{"negative slow request", func(c *Config) { c.SlowRequestThreshold = -1 }, "--slow-request-threshold"},

		{"switch interval NaN", func(c *Config) { c.SwitchInterval = math.NaN() }, "--switch-interval NaN"},
		{"switch interval below 1 µs", func(c *Config) { c.SwitchInterval = 1e-7 }, "--switch-interval 1e-07"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, `--log-level "loud"`},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, `--log-format "xml"`},
		{"umask", func(c *Config) { c.Umask = "999" }, `--umask "999"`},
		{"root path trailing slash", func(c *Config) { c.RootPath = "/app/" }, `--root-path "/app/"`},
		{"header turnstile frames", func(c *Config) { c.Headers = []string{"Content-Length: 3"} }, "Content-Length is turnstile's to send"},
		{"header on two lines", func(c *Config) { c.Headers = []string{"X-A: a\nb"} }, "must be one line"},
		{"request buffer over 64 MiB", func(c *Config) { c.RequestBufferBytes = MaxRequestBufferBytes + 1 }, "--request-buffer"},
		{"ws max queue", func(c *Config) { c.WSMaxQueue = 0 }, "--ws-max-queue 0: want 1..65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid(t)
			tc.set(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %q; want it to say %q", err, tc.want)
			}
		})
	}
}

// Validate reports every bad field at once, one line each.
func TestValidate_AllAtOnce(t *testing.T) {
	c := valid(t)
	c.Port, c.Workers, c.LogFormat = -1, 0, "xml"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil; want three errors")
	}
	if n := len(strings.Split(err.Error(), "\n")); n != 3 {
		t.Errorf("Validate() = %q: %d lines; want 3, one per field", err, n)
	}
}

// The edges that are allowed: the watchdog off (0), its threshold at the
// probe's 50 ms, a switch interval of 0 (CPython's default).
func TestValidate_Edges(t *testing.T) {
	c := valid(t)
	c.LoopStallThreshold, c.SlowRequestThreshold, c.SwitchInterval, c.Port = 0, 0, 0, 0
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() with the watchdog off = %v; want nil", err)
	}
	c.LoopStallThreshold = 50 * time.Millisecond
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() with a 50ms stall threshold = %v; want nil", err)
	}
}
