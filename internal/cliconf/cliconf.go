// Package cliconf fills a command's flags from TURNSTILE_* environment
// variables and an optional TOML file, generically over the pflag flag
// set: a flag added anywhere is configurable from all three sources
// without more code.
//
// Precedence: a flag on the command line > its environment variable > its
// key in the file > the flag's default. Names:
//
//	--forwarded-allow-ips  TURNSTILE_FORWARDED_ALLOW_IPS  forwarded-allow-ips = "10.0.0.0/8"
//
// A repeatable flag (a pflag SliceValue: --static, --reload-include) takes
// a TOML array or one TOML value, and in the environment a comma-separated
// list with CSV quoting ("a,b",c is two values: a,b and c), as pflag's
// string slices do.
//
// Unknown keys in the file and unknown TURNSTILE_* variables are errors
// with a "did you mean". A flag whose usage starts with "alias of --X"
// is an alias: it sets X. A boolean --no-X next to a boolean --X is X's
// negation: one setting under two names (--no-X=v sets X to !v), listed
// once as X. Setting two names of one setting in the same source (both
// flags, both variables, both keys) is an error naming both; across
// sources the usual precedence holds.
//
// A worker re-executed by the master must see exactly the master's
// settings, even if the file changed since or is unreadable after
// dropping privileges: the master calls Result.Export, which puts every
// setting that came from the environment or the file into EnvSettings as
// JSON, and a worker (Options.Worker) applies only that, never reading the
// environment or the file again.
package cliconf

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every setting's environment variable.
const EnvPrefix = "TURNSTILE_"

// EnvConfig names the TOML file when --config is not given.
const EnvConfig = EnvPrefix + "CONFIG"

// EnvSettings carries the master's settings from the environment and the
// file to its workers, as JSON {"flag-name": ["value", ...]}.
const EnvSettings = EnvPrefix + "WORKER_SETTINGS"

// Source says where a setting's value came from.
type Source string

const (
	Default Source = "default"
	File    Source = "file"
	Env     Source = "env"
	Flag    Source = "flag"
)

// Options tells Load which flags are settings and how to find the file.
type Options struct {
	// Skip are flags that are not settings (help, version, config,
	// format): no variable, no key, not listed.
	Skip []string
	// ConfigFlag is the flag naming the TOML file ("config"); EnvConfig
	// names it when the flag is not given.
	ConfigFlag string
	// Reserved are TURNSTILE_* variables that are not settings and not
	// errors (the worker's own, the test harness's).
	Reserved []string
	// Worker: apply only EnvSettings (see the package comment).
	Worker bool
	// Environ is the environment, os.Environ() when nil.
	Environ []string
	// Octal are flags whose value is an octal number written as a
	// string ("027", "0o22"): a TOML integer for one (umask = 0o27) is
	// that integer, given to the flag as "0o27", not its decimal digits.
	Octal []string
	// DefaultEnv maps a flag to a variable outside TURNSTILE_* that sets
	// it below the flag, its TURNSTILE_ variable and the file
	// (forwarded-allow-ips: FORWARDED_ALLOW_IPS, as uvicorn reads it):
	// its value is then from Env, labelled with that variable.
	DefaultEnv map[string]string
}

// Setting is one flag's effective value and where it came from.
type Setting struct {
	Name   string   `json:"name"`
	Value  any      `json:"value"` // a string, or []string for a repeatable flag
	Source Source   `json:"source"`
	Origin string   `json:"origin,omitempty"` // --x, TURNSTILE_X, or "path: key"
	raw    []string // the values applied from env or file
	list   bool
}

// Result is what Load found.
type Result struct {
	// File is the TOML file read, "" for none.
	File     string
	settings map[string]*Setting
	order    []string
	aliases  map[string]string // alias → target
	negated  map[string]bool   // aliases --no-X that set their target to the opposite
	octal    map[string]bool   // Options.Octal
}

// EnvName is the environment variable of flag name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// isList reports whether f is repeatable (a pflag SliceValue).
func isList(f *pflag.Flag) bool {
	_, ok := f.Value.(pflag.SliceValue)
	return ok
}

// aliasOf returns X when f's usage starts with "alias of --X".
func aliasOf(f *pflag.Flag) string {
	rest, ok := strings.CutPrefix(f.Usage, "alias of --")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, " ,;)"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// Load applies the environment and the file to fs (already parsed from
// the command line) and returns every setting with its source. Every bad
// value, unknown key and unknown variable is reported, one error each,
// joined.
func Load(fs *pflag.FlagSet, opts Options) (*Result, error) {
	env := opts.Environ
	if env == nil {
		env = os.Environ()
	}
	skip := map[string]bool{}
	for _, s := range opts.Skip {
		skip[s] = true
	}
	if opts.ConfigFlag != "" {
		skip[opts.ConfigFlag] = true
	}
	r := &Result{settings: map[string]*Setting{}, aliases: map[string]string{}, negated: map[string]bool{}, octal: map[string]bool{}}
	for _, n := range opts.Octal {
		r.octal[n] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if skip[f.Name] {
			return
		}
		if t := aliasOf(f); t != "" && fs.Lookup(t) != nil {
			r.aliases[f.Name] = t
			return
		}
		if t := negationOf(fs, f); t != "" && !skip[t] {
			r.aliases[f.Name] = t
			r.negated[f.Name] = true
			return
		}
		r.settings[f.Name] = &Setting{Name: f.Name, Source: Default, list: isList(f)}
		r.order = append(r.order, f.Name)
	})
	// Flags given on the command line (an alias counts for its target).
	for name, s := range r.settings {
		if fs.Changed(name) {
			s.Source, s.Origin = Flag, "--"+name
		}
	}
	var errs []error
	aliases := make([]string, 0, len(r.aliases))
	for alias := range r.aliases {
		aliases = append(aliases, alias)
	}
	sort.Strings(aliases)
	for _, alias := range aliases {
		target := r.aliases[alias]
		if !fs.Changed(alias) {
			continue
		}
		if s := r.settings[target]; s.Source == Flag {
			// pflag keeps the last of the two: refuse rather than guess.
			errs = append(errs, fmt.Errorf("%s and --%s: both set %s; give one", s.Origin, alias, target))
			continue
		}
		r.settings[target].Source, r.settings[target].Origin = Flag, "--"+alias
	}

	if opts.Worker {
		errs = append(errs, r.applyWorker(fs, env)...)
	} else {
		vars := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, EnvPrefix) {
				vars[k] = v
			}
		}
		path := ""
		if opts.ConfigFlag != "" {
			if f := fs.Lookup(opts.ConfigFlag); f != nil && f.Changed {
				path = f.Value.String()
			}
		}
		if path == "" {
			path = vars[EnvConfig]
		}
		// The file first, then the environment over it, then the flags
		// (already applied by the parser) win over both.
		if path != "" {
			r.File = path
			errs = append(errs, r.applyFile(fs, path)...)
		}
		errs = append(errs, r.applyEnv(fs, vars, opts.Reserved)...)
		errs = append(errs, r.applyDefaultEnv(fs, env, opts.DefaultEnv)...)
	}
	r.fill(fs)
	return r, errors.Join(errs...)
}

// fill records every setting's effective value.
func (r *Result) fill(fs *pflag.FlagSet) {
	for _, name := range r.order {
		s := r.settings[name]
		f := fs.Lookup(name)
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v := sv.GetSlice()
			if v == nil {
				v = []string{}
			}
			s.Value = v
		} else {
			s.Value = f.Value.String()
		}
	}
}

// negationOf returns X when f is a boolean --no-X and --X is a boolean.
func negationOf(fs *pflag.FlagSet, f *pflag.Flag) string {
	x, ok := strings.CutPrefix(f.Name, "no-")
	if !ok || f.Value.Type() != "bool" {
		return ""
	}
	if t := fs.Lookup(x); t != nil && t.Value.Type() == "bool" {
		return x
	}
	return ""
}

// targetValues turns the values given under name (a flag, alias or
// --no-X) into its target's: a --no-X's boolean is negated.
func (r *Result) targetValues(name string, vals []string) ([]string, error) {
	if !r.negated[name] {
		return vals, nil
	}
	if len(vals) != 1 {
		return nil, fmt.Errorf("want one value")
	}
	b, err := strconv.ParseBool(vals[0])
	if err != nil {
		return nil, errors.New("want true or false")
	}
	return []string{strconv.FormatBool(!b)}, nil
}

// target maps an alias to the flag it sets.
func (r *Result) target(name string) string {
	if t, ok := r.aliases[name]; ok {
		return t
	}
	return name
}

// names lists every setting and alias name, for "did you mean".
func (r *Result) names() []string {
	var n []string
	for k := range r.settings {
		n = append(n, k)
	}
	for k := range r.aliases {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func (r *Result) applyFile(fs *pflag.FlagSet, path string) []error {
	var doc map[string]any
	if _, err := toml.DecodeFile(path, &doc); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return []error{fmt.Errorf("%s: line %d: %s", path, pe.Position.Line, pe.Message)}
		}
		return []error{fmt.Errorf("--config %s: %w", path, err)}
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	by := map[string]string{} // target → the key that set it
	for _, key := range keys {
		label := path + ": " + key
		name := r.target(key)
		s := r.settings[name]
		if s == nil {
			errs = append(errs, fmt.Errorf("%s: unknown setting%s", label, suggest(key, r.names(), "")))
			continue
		}
		if other, dup := by[name]; dup {
			errs = append(errs, fmt.Errorf("%s: sets the same setting as %s", label, other))
			continue
		}
		by[name] = key
		v := doc[key]
		if n, isInt := v.(int64); isInt && r.octal[name] && n >= 0 {
			v = "0o" + strconv.FormatInt(n, 8) // umask = 0o27 is mask 027, not "23"
		}
		vals, err := tomlValues(v, s.list)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
			continue
		}
		if s.Source == Flag {
			continue // the command line wins; the value was still checked for shape
		}
		vals, err = r.targetValues(key, vals)
		if err == nil {
			err = apply(fs, name, vals, s.list)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s = %s: %w", label, tomlQuote(doc[key]), err))
			continue
		}
		s.Source, s.Origin, s.raw = File, label, vals
	}
	return errs
}

func (r *Result) applyEnv(fs *pflag.FlagSet, vars map[string]string, reserved []string) []error {
	known := map[string]string{} // variable → flag name it names
	var envNames []string
	for _, n := range r.names() {
		known[EnvName(n)] = n
		envNames = append(envNames, EnvName(n))
	}
	res := map[string]bool{EnvConfig: true, EnvSettings: true}
	for _, k := range reserved {
		res[k] = true
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	by := map[string]string{}
	for _, k := range keys {
		if res[k] {
			continue
		}
		key, ok := known[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown variable%s", k, suggest(k, envNames, "")))
			continue
		}
		name := r.target(key)
		s := r.settings[name]
		if other, dup := by[name]; dup {
			errs = append(errs, fmt.Errorf("%s: sets the same setting as %s", k, other))
			continue
		}
		by[name] = k
		v := vars[k]
		vals := []string{v}
		if s.list {
			var err error
			if vals, err = splitList(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want a comma-separated list (CSV quoting): %v", k, v, err))
				continue
			}
		}
		if s.Source == Flag {
			continue
		}
		vals, err := r.targetValues(key, vals)
		if err == nil {
			err = apply(fs, name, vals, s.list)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", k, v, err))
			continue
		}
		s.Source, s.Origin, s.raw = Env, k, vals
	}
	return errs
}

// applyDefaultEnv applies Options.DefaultEnv to settings still at their
// default.
func (r *Result) applyDefaultEnv(fs *pflag.FlagSet, env []string, m map[string]string) []error {
	var errs []error
	for name, k := range m {
		s := r.settings[name]
		if s == nil || s.Source != Default {
			continue
		}
		v := ""
		for _, kv := range env {
			if rest, ok := strings.CutPrefix(kv, k+"="); ok {
				v = rest
			}
		}
		if v == "" {
			continue
		}
		vals := []string{v}
		if s.list {
			var err error
			if vals, err = splitList(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want a comma-separated list (CSV quoting): %v", k, v, err))
				continue
			}
		}
		if err := apply(fs, name, vals, s.list); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", k, v, err))
			continue
		}
		s.Source, s.Origin, s.raw = Env, k, vals
	}
	return errs
}

// applyWorker applies the master's EnvSettings.
func (r *Result) applyWorker(fs *pflag.FlagSet, env []string) []error {
	raw := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvSettings+"="); ok {
			raw = v
		}
	}
	if raw == "" {
		return nil
	}
	var m map[string]struct {
		Source string   `json:"source"`
		Origin string   `json:"origin"`
		Values []string `json:"values"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return []error{fmt.Errorf("%s: %w", EnvSettings, err)}
	}
	var errs []error
	for name, v := range m {
		s := r.settings[name]
		if s == nil {
			errs = append(errs, fmt.Errorf("%s: unknown setting %s", EnvSettings, name))
			continue
		}
		if s.Source == Flag {
			continue
		}
		if err := apply(fs, name, v.Values, s.list); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", v.Origin, name, err))
			continue
		}
		s.Source, s.Origin, s.raw = Source(v.Source), v.Origin, v.Values
	}
	return errs
}

// Export returns the EnvSettings value for the workers: every setting
// taken from the environment or the file.
func (r *Result) Export() string {
	type entry struct {
		Source Source   `json:"source"`
		Origin string   `json:"origin"`
		Values []string `json:"values"`
	}
	m := map[string]entry{}
	for name, s := range r.settings {
		if s.Source == Env || s.Source == File {
			m[name] = entry{s.Source, s.Origin, s.raw}
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Settings returns every setting in flag order.
func (r *Result) Settings() []Setting {
	out := make([]Setting, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, *r.settings[n])
	}
	return out
}

// Label names where flag name's value came from, as an error message
// should: "--workers", "TURNSTILE_WORKERS" or "turnstile.toml: workers".
func (r *Result) Label(name string) string {
	name = r.target(name)
	s := r.settings[name]
	if s == nil {
		return "--" + name
	}
	switch s.Source {
	case Env:
		return s.Origin
	case File, Flag:
		return s.Origin
	}
	return "--" + name
}

// Relabel rewrites each error of a validation (errors.Join of one error
// per bad value, each starting with "--flag-name") to name the source of
// the value: the variable or the file key instead of the flag when the
// value came from there. It returns one message per error.
func (r *Result) Relabel(err error) []string {
	if err == nil {
		return nil
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out []string
	for _, e := range list {
		msg := e.Error()
		if rest, ok := strings.CutPrefix(msg, "--"); ok {
			end := strings.IndexFunc(rest, func(c rune) bool {
				return !(c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
			})
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			if _, known := r.settings[r.target(name)]; known {
				msg = r.Label(name) + rest[end:]
			}
		}
		out = append(out, strings.Split(msg, "\n")...)
	}
	return out
}

// apply sets flag name from vals: Set for one value, Replace for a list.
func apply(fs *pflag.FlagSet, name string, vals []string, list bool) error {
	f := fs.Lookup(name)
	if list {
		if err := f.Value.(pflag.SliceValue).Replace(vals); err != nil {
			return explain(f, err)
		}
		f.Changed = true
		return nil
	}
	if len(vals) != 1 {
		return fmt.Errorf("want one value")
	}
	if err := fs.Set(name, vals[0]); err != nil {
		// fs.Set wraps: keep the value's own error.
		return explain(f, f.Value.Set(vals[0]))
	}
	return nil
}

// Explain turns a flag value's parse error (strconv's, time's) into
// what the flag wants: "want an integer", "want true or false"; another
// error is returned as it is.
func Explain(f *pflag.Flag, err error) error { return explain(f, err) }

// explain is Explain.
func explain(f *pflag.Flag, err error) error {
	if err == nil {
		return errors.New("invalid value")
	}
	var ne *strconv.NumError
	if errors.As(err, &ne) || strings.Contains(err.Error(), "strconv.") || strings.Contains(err.Error(), "time: ") {
		rng := errors.Is(err, strconv.ErrRange) || strings.Contains(err.Error(), "value out of range")
		switch t := f.Value.Type(); {
		case strings.HasPrefix(t, "int") && rng, strings.HasPrefix(t, "uint") && rng:
			return fmt.Errorf("want an integer, this one is out of range (%s)", t)
		case strings.HasPrefix(t, "uint"):
			return errors.New("want an integer, 0 or more")
		case strings.HasPrefix(t, "int"):
			return errors.New("want an integer")
		case strings.HasPrefix(t, "float"):
			return errors.New("want a number")
		case t == "bool":
			return errors.New("want true or false")
		case t == "duration":
			return errors.New("want a duration like 30s or 1m30s")
		}
	}
	return err
}

// tomlValues turns a TOML value into flag strings: an array only for a
// repeatable setting, a scalar for any.
func tomlValues(v any, list bool) ([]string, error) {
	if arr, ok := v.([]any); ok {
		if !list {
			return nil, fmt.Errorf("want one value, not an array")
		}
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, err := tomlScalar(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := tomlScalar(v)
	if err != nil {
		return nil, err
	}
	// A repeatable setting takes one value as well as an array of
	// them: bind = "127.0.0.1:8000" is bind = ["127.0.0.1:8000"].
	return []string{s}, nil
}

func tomlScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case time.Time:
		return "", fmt.Errorf("a date is not a setting's value")
	case map[string]any:
		return "", fmt.Errorf("a table is not a setting's value (keys are flag names at the top level)")
	}
	return "", fmt.Errorf("unsupported value %v", v)
}

func tomlQuote(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// splitList splits a comma-separated list with CSV quoting.
func splitList(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{}, nil
	}
	rd := csv.NewReader(strings.NewReader(v))
	rec, err := rd.Read()
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Source says where setting name's value came from (Default for an
// unknown name).
func (r *Result) Source(name string) Source {
	if s := r.settings[r.target(name)]; s != nil {
		return s.Source
	}
	return Default
}

// Suggest returns " (did you mean PREFIX+x?)" for the name closest to
// got, or "" when none is close: for an unknown flag (prefix "--").
func Suggest(got string, names []string, prefix string) string {
	return suggest(got, names, prefix)
}

// suggest returns ` (did you mean x?)` for the closest name, or "".
func suggest(got string, names []string, prefix string) string {
	best, bestD := "", 1<<30
	g := strings.ToLower(got)
	for _, n := range names {
		d := distance(g, strings.ToLower(n))
		if d < bestD {
			best, bestD = n, d
		}
	}
	limit := max(2, len(got)/3)
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// distance is the Levenshtein distance, with '_' and '-' equal.
func distance(a, b string) int {
	a = strings.ReplaceAll(a, "_", "-")
	b = strings.ReplaceAll(b, "_", "-")
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
