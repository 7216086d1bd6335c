package main

// What gunicorn and uvicorn users type first (issue 28): --bind, the
// flags turnstile refuses with what it does instead, --env-file, and a
// "did you mean" for an unknown flag.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"turnstile/internal/cliconf"
	"turnstile/internal/config"
)

// refused are gunicorn's and uvicorn's flags turnstile has no use for,
// each with the one line that says what it does instead (the settings
// table, internal/config). The flags are hidden; giving one exits 2.
var refused = config.RefusedLines()

// refuse returns a line for each refused flag given (in name order), as
// a flag, a variable or a file key; --error-logfile - and --log-file -
// (stderr) are what turnstile does anyway, and --access-logfile -
// (gunicorn's "to stdout") turns the access log on: its records go to
// stderr with the others; so does --access-log-format.
func refuse(fs *pflag.FlagSet) error {
	names := make([]string, 0, len(refused))
	for n := range refused {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil || !f.Changed {
			continue
		}
		if (n == "error-logfile" || n == "log-file") && f.Value.String() == "-" {
			continue
		}
		if n == "access-logfile" && f.Value.String() == "-" {
			if !fs.Changed("access-log") {
				fs.Set("access-log", "true")
			}
			continue
		}
		errs = append(errs, fmt.Errorf("--%s: %s", n, refused[n]))
	}
	// --access-log-format (gunicorn's --access-logformat) is of no use
	// without the access log: it turns it on, unless --access-log says.
	// (Set by its alias, a variable or the file, it is not empty.)
	if fs.Lookup("access-log-format").Value.String() != "" && !fs.Changed("access-log") {
		fs.Set("access-log", "true")
	}
	return errors.Join(errs...)
}

// flagError adds the nearest flag to pflag's "unknown flag: --x", and
// names a flag with a shorthand by its long name only, as the other
// messages do ("-w, --workers" → "--workers").
func flagError(cmd *cobra.Command, err error) error {
	// pflag's `invalid argument "abc" for "-w, --workers" flag:
	// strconv.ParseInt: ...` becomes `--workers "abc": want an integer`.
	if m := invalidArgument.FindStringSubmatch(err.Error()); m != nil {
		if f := cmd.Flags().Lookup(m[2]); f != nil {
			return fmt.Errorf("--%s %s: %v", m[2], strconv.Quote(m[1]), cliconf.Explain(f, errors.New(m[3])))
		}
	}
	got, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		if m := shorthandName.ReplaceAllString(err.Error(), `"$1"`); m != err.Error() {
			return errors.New(m)
		}
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden { // never a refused flag (issue 28: --access-logformat)
			names = append(names, f.Name)
		}
	})
	if s := cliconf.Suggest(got, names, "--"); s != "" {
		return errors.New(err.Error() + s)
	}
	return err
}

var shorthandName = regexp.MustCompile(`"-[a-zA-Z], (--[a-z0-9-]+)"`)

var invalidArgument = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-[a-zA-Z], )?--([a-z0-9-]+)" flag: (.*)$`)

// applyBind turns gunicorn's --bind into --host/--port or --uds. One
// address only: the workers share one listening socket.
func applyBind(res *cliconf.Result, cfg *config.Config) error {
	binds := cfg.Bind
	label := res.Label("bind")
	switch len(binds) {
	case 0:
		return nil
	case 1:
	default:
		return fmt.Errorf("%s given %d times: turnstile serves one address (one socket the workers share); put a proxy in front for more, or run a second turnstile", label, len(binds))
	}
	for _, other := range []string{"host", "port", "uds"} {
		if res.Source(other) != cliconf.Default {
			return fmt.Errorf("%s and %s: both set the address; give one", label, res.Label(other))
		}
	}
	b := binds[0]
	if strings.HasPrefix(b, "fd://") {
		return fmt.Errorf("%s %q: gunicorn's fd:// is not supported: turnstile takes an inherited socket from systemd socket activation (LISTEN_FDS; see the README, \"Deployment\")", label, b)
	}
	if path, ok := strings.CutPrefix(b, "unix:"); ok {
		if path == "" {
			return fmt.Errorf("%s %q: want unix:PATH", label, b)
		}
		cfg.UDS = path
		return nil
	}
	host, port := b, strconv.Itoa(config.DefaultPort)
	if h, p, err := net.SplitHostPort(b); err == nil {
		host, port = h, p
	} else if strings.Contains(strings.Trim(b, "[]"), ":") && !strings.HasPrefix(b, "[") {
		return fmt.Errorf("%s %q: want HOST:PORT, HOST, [IPV6]:PORT or unix:PATH", label, b)
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return fmt.Errorf("%s %q: give the host (0.0.0.0 for every IPv4 interface)", label, b)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s %q: want a port 0..65535", label, b)
	}
	cfg.Host, cfg.Port = host, n
	return nil
}

// loadEnvFile sets the variables of a dotenv file that are not set
// already (uvicorn's --env-file, python-dotenv's rules for the common
// cases): KEY=VALUE, "export KEY=VALUE", # comments, blank lines, 'single'
// quotes (literal) and "double" quotes (\n, \t, \", \\ escapes).
func loadEnvFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %s", strconvQuote(path), errText(err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	type kv struct{ k, v string }
	var vars []kv
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !isEnvName(k) {
			return fmt.Errorf("%s: line %d: want KEY=VALUE", path, n)
		}
		switch {
		case len(v) >= 2 && v[0] == '\'' && strings.IndexByte(v[1:], '\'') == len(v)-2:
			v = v[1 : len(v)-1]
		case len(v) >= 1 && v[0] == '"':
			s, rest, err := unquoteDouble(v)
			if err != nil || (rest != "" && rest[0] != '#') {
				return fmt.Errorf("%s: line %d: unterminated or malformed \"...\" value", path, n)
			}
			v = s
		case len(v) >= 1 && v[0] == '\'':
			return fmt.Errorf("%s: line %d: unterminated '...' value", path, n)
		default:
			if i := strings.Index(v, " #"); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
		}
		vars = append(vars, kv{k, v})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %s", strconvQuote(path), errText(err))
	}
	for _, e := range vars {
		if _, set := os.LookupEnv(e.k); !set {
			os.Setenv(e.k, e.v)
		}
	}
	return nil
}

// unquoteDouble reads a "..." value with dotenv's escapes and returns it
// and what follows the closing quote, trimmed.
func unquoteDouble(v string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '"':
			return b.String(), strings.TrimSpace(v[i+1:]), nil
		case '\\':
			if i+1 < len(v) {
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				default:
					b.WriteByte(v[i])
				}
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated")
}

func isEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// errText is an os error without its Go operation ("no such file or
// directory").
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
