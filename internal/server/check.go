package server

import (
	"errors"
	"unsafe"

	"turnstile/internal/asgi"
	"turnstile/internal/config"
	"turnstile/internal/python"
	"turnstile/internal/tlsconf"
	"turnstile/internal/wsgi"
	pysrc "turnstile/python"
)

// pythonConfig is how a worker starts CPython and imports cfg's app;
// Check uses the same.
func pythonConfig(cfg *config.Config, program string) python.Config {
	return python.Config{
		ProgramName:    program,
		Bootstrap:      pysrc.Bootstrap,
		AppDir:         appDir(cfg),
		AppSpec:        cfg.App,
		Factory:        cfg.Factory,
		Interface:      cfg.Interface,
		SwitchInterval: cfg.SwitchInterval,
		Workers:        cfg.Workers,
		LogConfig:      cfg.LogConfig,
		LogConfigKind:  config.LogConfigKind(cfg.LogConfig),
		AfterLoad:      []unsafe.Pointer{wsgi.AfterLoad, asgi.AfterLoad},
	}
}

// Check imports cfg's app exactly as a worker does (the same virtualenv
// check, sys.path, factory call and interface detection) without serving,
// and returns the interface: "wsgi" or "asgi". An app that cannot be
// imported returns a *python.Error whose Text is the traceback. The TLS
// files are read as a worker reads them.
func Check(cfg *config.Config) (string, error) {
	if t := cfg.TLS(); t.Enabled() {
		if _, err := tlsconf.Load(&t); err != nil {
			return "", errors.New("TLS: " + err.Error())
		}
	}
	program, err := pythonProgram(cfg)
	if err != nil {
		return "", err
	}
	return python.Start(pythonConfig(cfg, program))
}
