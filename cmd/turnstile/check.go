package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"turnstile/internal/cliconf"
	"turnstile/internal/config"
	"turnstile/internal/logs"
	"turnstile/internal/python"
	"turnstile/internal/server"
	"turnstile/internal/venv"
	"turnstile/internal/workerctl"
)

// reservedEnv are TURNSTILE_* variables that are not settings: the
// worker's own, and the build's and tests' (Makefile, tests/, bench/).
var reservedEnv = append([]string{
	workerctl.EnvWorker, workerctl.EnvWorkerAdmin,
	"TURNSTILE_BIN", "TURNSTILE_PYTHON", "TURNSTILE_TEST_DB",
}, config.SwitchVars...)

// loadConfig fills cfg from the environment and the --config file under
// the flags already parsed (internal/cliconf), then applies defaults and
// validates, the virtualenv, --app-dir and the files named included
// outside a worker. Every bad value is reported, each one line naming
// where it came from: the command line's (config.ValueErrors), the
// environment's and the file's, the refused flags and Validate's.
func loadConfig(cmd *cobra.Command, cfg *config.Config, app string) (*cliconf.Result, error) {
	fs := cmd.Flags()
	var lines []string
	fail := func() error { return errors.New(strings.Join(lines, "\n")) }
	for _, b := range config.ValueErrors(fs) {
		lines = append(lines, fmt.Sprintf("--%s %s: %v", b.Flag.Name, strconv.Quote(b.Value), cliconf.Explain(b.Flag, b.Err)))
	}
	if f := fs.Lookup("config"); f.Changed && strings.HasSuffix(f.Value.String(), ".py") {
		lines = append(lines, fmt.Sprintf("--config %s: turnstile's file is TOML with its flag names (workers = 4), not gunicorn's Python: see the README, \"Coming from gunicorn / uvicorn\"", f.Value.String()))
		return nil, fail()
	}
	cfg.Switches = config.ReadSwitches()
	// The refused flags are names in all three sources too (a key
	// access-logfile, TURNSTILE_ACCESS_LOGFILE): refuse sees them set.
	res, err := cliconf.Load(fs, cliconf.Options{
		Skip:       []string{"help", "version", "format"},
		ConfigFlag: "config",
		Reserved:   reservedEnv,
		Worker:     server.IsWorker(),
		Octal:      []string{"umask"},
		DefaultEnv: map[string]string{"forwarded-allow-ips": config.EnvForwardedAllowIPs},
	})
	if err != nil {
		lines = append(lines, strings.Split(err.Error(), "\n")...)
	}
	lines = append(lines, res.Relabel(refuse(fs))...)
	// --chdir first, so that every other path is relative to it; a
	// worker inherits the master's directory and environment (--env-file).
	if dir := cfg.Chdir; dir != "" && !server.IsWorker() {
		if err := os.Chdir(dir); err != nil {
			lines = append(lines, res.Label("chdir")+" "+strconvQuote(dir)+": "+errText(err))
			return nil, fail() // the other paths would be looked up from the wrong directory
		}
	}
	if file := cfg.EnvFile; file != "" && !server.IsWorker() {
		if err := loadEnvFile(file); err != nil {
			lines = append(lines, res.Label("env-file")+" "+err.Error())
		}
	}
	if err := applyBind(res, cfg); err != nil {
		lines = append(lines, err.Error())
	}
	cfg.App = app
	cfg.ApplyDefaults()
	errs := []error{cfg.Validate()}
	// The master (and check) read the virtualenv's pyvenv.cfg, look at
	// --app-dir and at the files and directories the settings name before
	// anything is bound or started, so that a wrong one is a bad value
	// like the others: one line, exit 2. These are files only (package
	// venv has no cgo; Python is never initialised here). A worker
	// checks again when it starts Python (internal/server).
	if !server.IsWorker() {
		if _, err := venv.Python(cfg.Venv, os.Getenv("VIRTUAL_ENV"), server.BuildInfo()); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, venv.CheckAppDir(cfg.AppDir), server.CheckWorkerAccess(cfg), cfg.CheckPaths())
	}
	for _, err := range errs {
		lines = append(lines, res.Relabel(err)...)
	}
	if len(lines) > 0 {
		return nil, fail()
	}
	return res, nil
}

// checkCommand is `turnstile check [flags] MODULE:ATTR`: the effective
// configuration with each setting's source, and the app imported as a
// worker imports it, without serving. Exit 0, or 1 with the traceback
// when the app cannot be imported (2 for a bad setting, as for serving).
func checkCommand(cfg *config.Config, code *int) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:           "check [flags] MODULE:ATTR",
		Short:         "Import the app as a worker would and print the effective configuration, without serving",
		Args:          oneApp,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			res, err := loadConfig(cmd, cfg, args[0])
			if err != nil {
				return err
			}
			log := logs.New(os.Stderr, cfg.LogLevel, "text")
			python.SetLogger(log)
			// As a worker does: under --user/--group, so that a file the
			// service user cannot read fails here too.
			var ierr error
			if cred, _ := cfg.Credential(); cred != nil && os.Geteuid() == 0 {
				ierr = dropTo(cred)
			}
			kind := ""
			if ierr == nil {
				kind, ierr = server.Check(cfg)
			}
			traceback := ""
			if ierr != nil {
				var pe *python.Error
				if errors.As(ierr, &pe) {
					traceback = "turnstile: cannot load the app " + cfg.App + "\n" + pe.Text
				} else {
					traceback = "turnstile: " + ierr.Error()
				}
				*code = 1
			}
			var settings []cliconf.Setting
			for _, s := range res.Settings() {
				if st := config.Lookup(s.Name); st != nil && st.Refused != "" {
					continue // refuse let only a harmless one through (--error-logfile -)
				}
				if strings.Contains(s.Name, "password") && s.Value != "" {
					s.Value = "***"
				}
				// --bind set the address: show its host and port (or uds)
				// as coming from it, not as the defaults.
				if len(cfg.Bind) > 0 && (s.Name == "uds") == (cfg.UDS != "") {
					switch s.Name {
					case "host":
						s.Value, s.Source, s.Origin = cfg.Host, res.Source("bind"), res.Label("bind")
					case "port":
						s.Value, s.Source, s.Origin = strconv.Itoa(cfg.Port), res.Source("bind"), res.Label("bind")
					case "uds":
						s.Value, s.Source, s.Origin = cfg.UDS, res.Source("bind"), res.Label("bind")
					}
				}
				// --access-logfile - turned the access log on (refuse).
				if s.Name == "access-log" && s.Value == "false" && cfg.AccessLog {
					from := "access-logfile"
					if cfg.AccessLogFormat != "" {
						from = "access-log-format"
					}
					s.Value, s.Source, s.Origin = "true", res.Source(from), res.Label(from)
				}
				settings = append(settings, s)
			}
			// The address served, from --host/--port, --uds or --bind.
			addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
			if cfg.UDS != "" {
				addr = "unix:" + cfg.UDS
			}
			if format == "json" {
				out := map[string]any{"app": cfg.App, "interface": kind, "address": addr, "config_file": res.File, "settings": settings}
				if ierr != nil {
					out["interface"] = nil
					out["error"] = traceback
				}
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(out)
			} else {
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "app\t%s\n", cfg.App)
				fmt.Fprintf(tw, "address\t%s\n", addr)
				if ierr == nil {
					fmt.Fprintf(tw, "interface\t%s\n", kind)
				} else {
					fmt.Fprintf(tw, "interface\t(the app cannot be imported)\n")
				}
				file := res.File
				if file == "" {
					file = "(none)"
				}
				fmt.Fprintf(tw, "config file\t%s\n\n", file)
				fmt.Fprintf(tw, "SETTING\tVALUE\tSOURCE\n")
				for _, s := range settings {
					v := fmt.Sprint(s.Value)
					if l, ok := s.Value.([]string); ok {
						v = "[" + strings.Join(l, ", ") + "]"
					}
					if st := config.Lookup(s.Name); st != nil && (v == "0" || v == "0s") {
						if z := st.ZeroMeaning(); z != "" {
							v += " (" + z + ")" // what 0 stands for: "off", "never", "no limit"
						}
					}
					src := string(s.Source)
					if s.Source != cliconf.Default {
						src += " (" + s.Origin + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, v, src)
				}
				tw.Flush()
			}
			if ierr != nil {
				fmt.Fprintln(os.Stderr, traceback)
			}
			return nil
		},
	}
	c.Flags().SortFlags = false
	c.Flags().StringVar(&format, "format", "text", "output: text or json")
	return c
}

// dropTo switches every thread of this process to cred (Linux: Go applies
// setuid(2) and friends to all threads).
func dropTo(cred *syscall.Credential) error {
	if !cred.NoSetGroups {
		groups := make([]int, len(cred.Groups))
		for i, g := range cred.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("--user/--group: setgroups: %w", err)
		}
	}
	if err := syscall.Setgid(int(cred.Gid)); err != nil {
		return fmt.Errorf("--group: setgid(%d): %w", cred.Gid, err)
	}
	if err := syscall.Setuid(int(cred.Uid)); err != nil {
		return fmt.Errorf("--user: setuid(%d): %w", cred.Uid, err)
	}
	return nil
}
