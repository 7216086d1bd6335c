// Command turnstile serves a Python WSGI or ASGI app from an embedded
// CPython. It only parses flags and wires packages together: without
// TURNSTILE_WORKER it runs the master (internal/supervise), with it a
// worker (internal/server).
//
//	turnstile [flags] MODULE:ATTR
//	turnstile check [flags] MODULE:ATTR   import the app, print the effective settings (check.go)
//	turnstile top | ctl ACTION            the live view and control, on the admin listener (top.go)
//	turnstile version
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

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
	code := 0
	cmd := &cobra.Command{
		Use:   "turnstile [flags] MODULE:ATTR",
		Short: "An application server for Python web apps, written in Go",
		Long: "turnstile serves a WSGI (PEP 3333) or ASGI 3.0 app from CPython " + python.BuildMinor + " embedded in this binary.\n" +
			"Go owns the sockets and parsers; Python threads only run the app.",
		Args:          oneApp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "0.1.0 (CPython " + python.BuildVersion + ")",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := loadConfig(cmd, &cfg, args[0])
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
	// Every setting, its aliases and the refused gunicorn/uvicorn flags,
	// from the one table (internal/config, settings.go).
	config.Register(f, &cfg)
	// Every bad value is reported, not only the first (loadConfig).
	config.DeferValueErrors(f)
	cmd.SetFlagErrorFunc(flagError)

	cmd.AddCommand(checkCommand(&cfg, &code))
	version := &cobra.Command{
		Use:   "version",
		Short: "Print turnstile's version and its CPython's (as --version)",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Println("turnstile version " + cmd.Version)
		},
	}
	// The server's flags are the root's persistent flags (check takes
	// them too); the help of the commands that ignore them does not list
	// them.
	for _, c := range []*cobra.Command{topCommand(&code), ctlCommand(&code), version} {
		c.SetUsageTemplate(strings.Replace(c.UsageTemplate(), "{{if .HasAvailableInheritedFlags}}", "{{if false}}", 1))
		cmd.AddCommand(c)
	}

	if err := cmd.Execute(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(os.Stderr, "turnstile:", line)
		}
		return 2
	}
	return code
}

// oneApp is the commands' Args: the one MODULE:ATTR, said in those words
// when it is missing (not cobra's "accepts 1 arg(s), received 0").
func oneApp(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 0:
		return errors.New("give the app as MODULE:ATTR (e.g. hello:app); see turnstile --help")
	case 1:
		return nil
	}
	return fmt.Errorf("one app only (MODULE:ATTR), got %d arguments: %s", len(args), strings.Join(args, " "))
}
