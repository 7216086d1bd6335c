package server

import (
	"os"
	"path/filepath"

	"turnstile/internal/config"
	"turnstile/internal/venv"
)

// CheckWorkerAccess reports a file that a worker run as --user/--group
// could not read (the build's libpython and standard library, the
// virtualenv, the app directory: package venv's CheckAccess), for the
// master to refuse in one line (exit 2) before it binds or forks, rather
// than a worker that loads another libpython or fails at every restart.
// nil without --user/--group, when not root, or when the settings are
// wrong in a way their own checks report (a bad --user, a bad --venv).
// Files only: Python is never initialised.
func CheckWorkerAccess(cfg *config.Config) error {
	cred, err := cfg.Credential()
	if err != nil || cred == nil || os.Geteuid() != 0 {
		return nil
	}
	py, err := venv.Python(cfg.Venv, os.Getenv("VIRTUAL_ENV"), BuildInfo())
	if err != nil {
		return nil
	}
	dir := cfg.Venv
	if dir == "" {
		dir = os.Getenv("VIRTUAL_ENV")
	}
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
	}
	who := "--user " + cfg.User
	if cfg.User == "" {
		who = "--group " + cfg.Group
	}
	return venv.CheckAccess(who, cred, BuildInfo(), venv.Worker{Python: py, Venv: dir, AppDir: appDir(cfg)})
}
