package config

// The files and directories the settings name, looked at before anything
// is bound or started (issue 28), so that a missing one is a bad value
// like the others (one line, exit 2) rather than an error at serving
// (exit 1) or one `turnstile check` passes.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// validateAdminBind checks AdminBind's form: off, unix:PATH or HOST:PORT.
func (c *Config) validateAdminBind(bad func(string, ...any)) {
	a := c.AdminBind
	if a == "off" {
		return
	}
	if path, ok := strings.CutPrefix(a, "unix:"); ok {
		if path == "" {
			bad("--admin-bind %q: want unix:PATH", a)
		}
		return
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		bad("--admin-bind %q: want HOST:PORT, unix:PATH or off", a)
	}
}

// CheckPaths reports, one error each, a TLS file (--ssl-certfile,
// --ssl-keyfile, --ssl-ca; when TLS is on: both of the first two given)
// the master cannot open, and a file the master
// creates (--pid-file, the --uds or --bind unix: socket, an --admin-bind
// unix: socket) whose directory does not exist. The master calls it
// (and check); a worker does not, as it may run as another user.
func (c *Config) CheckPaths() error {
	var errs []error
	var files []struct{ name, path string }
	for _, p := range c.SSLCertFiles {
		files = append(files, struct{ name, path string }{"ssl-certfile", p})
	}
	for _, p := range c.SSLKeyFiles {
		files = append(files, struct{ name, path string }{"ssl-keyfile", p})
	}
	files = append(files, struct{ name, path string }{"ssl-ca", c.SSLCA})
	for _, f := range files {
		// Without both certfile and keyfile, Validate has said so: one
		// line is enough.
		if f.path == "" || len(c.SSLCertFiles) == 0 || len(c.SSLKeyFiles) == 0 {
			continue
		}
		fh, err := os.Open(f.path)
		if err == nil {
			fi, serr := fh.Stat()
			fh.Close()
			if serr == nil && fi.IsDir() {
				err = errors.New("is a directory, want a PEM file")
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %s: %s", f.name, f.path, pathErrText(err)))
		}
	}
	uds := "--uds " + c.UDS
	if len(c.Bind) == 1 {
		uds = "--bind " + c.Bind[0] // the label says what was typed
	}
	adminSock, _ := strings.CutPrefix(c.AdminBind, "unix:")
	if adminSock == c.AdminBind {
		adminSock = "" // HOST:PORT or off
	}
	for _, f := range []struct{ label, path string }{
		{"--pid-file " + c.PidFile, c.PidFile}, {uds, c.UDS}, {"--admin-bind " + c.AdminBind, adminSock},
	} {
		if f.path == "" {
			continue
		}
		dir := filepath.Dir(f.path)
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s: directory %s does not exist", f.label, dir))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: directory %s: %s", f.label, dir, pathErrText(err)))
		case !fi.IsDir():
			errs = append(errs, fmt.Errorf("%s: %s is not a directory", f.label, dir))
		}
	}
	return errors.Join(errs...)
}

// pathErrText is an os error without its operation and path ("no such
// file or directory").
func pathErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
