package tests

// The virtualenv and --app-dir are checked by the master, from files only,
// before it binds anything (issue 27): a virtualenv made by another Python
// install of the same minor version (Debian's 3.11.2 under a binary built
// with pyenv's 3.11.7) failed deep in the app's import with "No module
// named '_struct'". Now it is one line naming the `make build PYTHON=...`
// that fits, exit 2, as for any bad value; so is a --venv that is not a
// virtualenv and an --app-dir that is not a directory. A virtualenv of the
// build's own install is accepted however it names it (a symlinked home,
// .../bin/python3 for .../bin/python3.11, $VIRTUAL_ENV).

import (
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// vnBuildPython is the Python the binary was built with (make test sets
// TURNSTILE_PYTHON) and its full version, "3.11.7".
func vnBuildPython(t *testing.T) (exe, version string) {
	t.Helper()
	binPath(t)
	exe = os.Getenv("TURNSTILE_PYTHON")
	if exe == "" {
		t.Skip("TURNSTILE_PYTHON is not set: run `make test`")
	}
	out, err := exec.Command(exe, "-c", "import platform; print(platform.python_version())").Output()
	if err != nil {
		t.Fatalf("%s: %v", exe, err)
	}
	return exe, strings.TrimSpace(string(out))
}

// vnHold listens on two free ports of 127.0.0.1 until the test ends and
// returns the flags that make turnstile bind them (--port, --admin-bind):
// a master that binds before it checks fails with "address already in
// use" (exit 1), not with the check's line.
func vnHold(t *testing.T) []string {
	t.Helper()
	var ports []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	return []string{"--host", "127.0.0.1", "--port", ports[0], "--admin-bind", "127.0.0.1:" + ports[1]}
}

// vnRefused runs the binary, serving and as `check`, with args (after
// vnHold's flags and before conf_app:app) and env, and wants exit 2 and
// exactly one line on stderr, "turnstile: " + want... in it.
func vnRefused(t *testing.T, env []string, args []string, want ...string) {
	t.Helper()
	for _, sub := range [][]string{nil, {"check"}} {
		argv := append(append(append(append([]string{}, sub...), vnHold(t)...), args...), "conf_app:app")
		cmd := exec.Command(binPath(t), argv...)
		cmd.Env, cmd.Dir = env, AppDir()
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%v did not exit within 30s:\n%s", argv, stderr.String())
		}
		code, errText := cmd.ProcessState.ExitCode(), stderr.String()
		if code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", argv, code, errText)
		}
		if n := strings.Count(errText, "\n"); n != 1 || !strings.HasSuffix(errText, "\n") {
			t.Errorf("%v: %d lines on stderr, want one:\n%s", argv, n, errText)
		}
		if !strings.HasPrefix(errText, "turnstile: ") {
			t.Errorf("%v: stderr does not start with \"turnstile: \":\n%s", argv, errText)
		}
		for _, w := range want {
			if !strings.Contains(errText, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", argv, w, errText)
			}
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", argv, stdout.String())
		}
	}
}

// vnFakeVenv writes a directory with bin/ and a pyvenv.cfg of cfg: all the
// master reads of a virtualenv.
func vnFakeVenv(t *testing.T, cfg string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".venv")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// vnMakeVenv runs `python -m venv --without-pip` into a temp dir.
func vnMakeVenv(t *testing.T, python string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".venv")
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", dir).CombinedOutput(); err != nil {
		t.Fatalf("%s -m venv: %v\n%s", python, err, out)
	}
	return dir
}

// A virtualenv whose pyvenv.cfg names another Python install is refused
// by the master before it binds, in one line with both make commands: the
// same minor and micro version (another install of it), another micro
// version, another minor version, and from $VIRTUAL_ENV or
// TURNSTILE_VENV as from --venv.
func TestConfig_VenvOtherInterpreter(t *testing.T) {
	build, version := vnBuildPython(t)
	parts := strings.SplitN(version, ".", 3)
	minor := parts[0] + "." + parts[1]
	other := filepath.Join(t.TempDir(), "otherpy", "bin")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	otherExe := filepath.Join(other, "python"+minor)
	if err := os.WriteFile(otherExe, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	buildMsg := "; this binary is built for " + build + " (" + version + "): rebuild with make build PYTHON="
	for _, c := range []struct{ name, cfg, madeBy string }{
		{"same-version", "home = " + other + "\nversion = " + version + "\n", otherExe + " (" + version + ")"},
		{"other-micro", "home = " + other + "\nversion = " + minor + ".99\nexecutable = " + otherExe + "\n", otherExe + " (" + minor + ".99)"},
		{"virtualenv-tool", "home = " + other + "\nversion_info = " + minor + ".99.final.0\n", otherExe + " (" + minor + ".99)"},
		{"other-minor", "home = " + other + "\nversion = 3.99.1\n", filepath.Join(other, "python3.99") + " (3.99.1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			venv := vnFakeVenv(t, c.cfg)
			recreate := ", or recreate the virtualenv with " + build + " -m venv --clear " + venv
			vnRefused(t, cfEnv(), []string{"--venv", venv}, "turnstile: --venv "+venv+" was made by "+c.madeBy+buildMsg, recreate)
		})
	}
	venv := vnFakeVenv(t, "home = "+other+"\nversion = "+version+"\n")
	vnRefused(t, cfEnv("VIRTUAL_ENV="+venv), nil, "turnstile: VIRTUAL_ENV="+venv+" was made by "+otherExe, buildMsg+otherExe)
	vnRefused(t, cfEnv("TURNSTILE_VENV="+venv), nil, "turnstile: TURNSTILE_VENV "+venv+" was made by "+otherExe, buildMsg+otherExe)
	file := cfWriteFile(t, "venv = \""+venv+"\"\n")
	vnRefused(t, cfEnv(), []string{"--config", file}, "turnstile: "+file+": venv "+venv+" was made by "+otherExe)
}

// The case of issue 27 itself: a real virtualenv made by Debian's
// /usr/bin/python3 under a binary built with another Python.
func TestConfig_VenvDebianPython(t *testing.T) {
	build, _ := vnBuildPython(t)
	deb, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3 on this machine")
	}
	if real, _ := filepath.EvalSymlinks(build); real == deb {
		t.Skip("the binary is built with /usr/bin/python3 itself")
	}
	venv := vnMakeVenv(t, "/usr/bin/python3") // .ci/run installs python3-venv
	vnRefused(t, cfEnv(), []string{"--venv", venv}, "turnstile: --venv "+venv+" was made by "+deb+" (",
		// "(it makes bin/turnstile-3.11)" comes between when the minor
		// versions differ (a 3.12 binary).
		"rebuild with make build PYTHON="+deb, "or recreate the virtualenv with "+build+" -m venv --clear "+venv)
}

// A real virtualenv of another minor version (pyenv's 3.12 under a 3.11
// binary, or the reverse), named as the Makefile names them: the advice
// names this binary's own Python and a virtualenv for its version (issue
// 28: a 3.12 binary advised `-m venv .venv-3.11`, and made again in place
// without --clear, the old bin/python, the other Python, stayed).
func TestConfig_VenvOtherMinor(t *testing.T) {
	build, version := vnBuildPython(t)
	parts := strings.SplitN(version, ".", 3)
	minor := parts[0] + "." + parts[1]
	other := ""
	for _, m := range []string{"3.12", "3.11", "3.13"} {
		if m == minor {
			continue
		}
		if found, _ := filepath.Glob("/root/.pyenv/versions/" + m + ".*/bin/python" + m); len(found) > 0 {
			other, _ = filepath.EvalSymlinks(found[0])
			break
		}
	}
	if other == "" {
		t.Skip("no pyenv Python of another minor version on this machine")
	}
	out, err := exec.Command(other, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	otherMinor := strings.TrimSpace(string(out))
	dir := filepath.Join(t.TempDir(), ".venv-"+otherMinor)
	if out, err := exec.Command(other, "-m", "venv", "--without-pip", dir).CombinedOutput(); err != nil {
		t.Fatalf("%s -m venv: %v\n%s", other, err, out)
	}
	own := filepath.Join(filepath.Dir(dir), ".venv-"+minor)
	vnRefused(t, cfEnv(), []string{"--venv", dir}, "turnstile: --venv "+dir+" was made by ",
		"; this binary is built for "+build+" ("+version+"): rebuild with make build PYTHON=",
		" (it makes bin/turnstile-"+otherMinor+"), or make one for this binary with "+build+" -m venv "+own+" and use --venv "+own+"\n")
}

// --venv that does not exist, is a file or is a directory without
// pyvenv.cfg, and --app-dir that does not exist or is a file: one line,
// exit 2, nothing bound. (Before, the master bound and started a worker,
// which failed; a missing --app-dir surfaced as the app's ImportError.)
func TestConfig_VenvNotAVirtualenv(t *testing.T) {
	binPath(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	venv := os.Getenv("TURNSTILE_VENV")
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"venv-missing", cfEnv(), []string{"--venv", "/nonexistent"}, "turnstile: --venv /nonexistent does not exist"},
		{"venv-missing-env", cfEnv("VIRTUAL_ENV=/nonexistent"), nil, "turnstile: VIRTUAL_ENV=/nonexistent does not exist"},
		{"venv-file", cfEnv(), []string{"--venv", file}, "turnstile: --venv " + file + " is not a directory"},
		{"venv-no-cfg", cfEnv(), []string{"--venv", dir}, "turnstile: --venv " + dir + " is not a virtualenv (no pyvenv.cfg)"},
		{"app-dir-missing", cfEnv(), []string{"--venv", venv, "--app-dir", "/nonexistent"}, "turnstile: --app-dir /nonexistent does not exist"},
		{"app-dir-file", cfEnv(), []string{"--venv", venv, "--app-dir", file}, "turnstile: --app-dir " + file + " is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) { vnRefused(t, c.env, c.args, c.want) })
	}
}

// A virtualenv of the build's own install is accepted however its
// pyvenv.cfg names it: made by .../bin/python3 rather than python3.11,
// with a home that is a symlink to the build's bin directory, and from
// $VIRTUAL_ENV; the app runs with the virtualenv's python as
// sys.executable.
func TestConfig_VenvSameInstall(t *testing.T) {
	build, _ := vnBuildPython(t)
	bin := filepath.Dir(build)
	if _, err := os.Stat(filepath.Join(bin, "python3")); err != nil {
		t.Fatalf("%s has no python3 beside it: %v", build, err)
	}
	byPython3 := vnMakeVenv(t, filepath.Join(bin, "python3"))

	symHome := vnMakeVenv(t, build)
	link := filepath.Join(t.TempDir(), "bin-link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(symHome, "pyvenv.cfg")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "home" {
			line = "home = " + link
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}

	for name, venv := range map[string]string{"python3": byPython3, "symlinked-home": symHome} {
		if _, stderr, code := cfRun(t, cfEnv(), "check", "--venv", venv, "conf_app:app"); code != 0 {
			t.Errorf("%s: check --venv %s: exit %d\n%s", name, venv, code, stderr)
		}
	}
	// $VIRTUAL_ENV (no --venv): served, with its python as sys.executable.
	venv := os.Getenv("TURNSTILE_VENV")
	cmd := exec.Command(binPath(t), "--app-dir", AppDir(), "--host", "127.0.0.1", "--port", "0",
		"--admin-bind", "127.0.0.1:0", "--log-format", "json", "embed_version:app")
	cmd.Env, cmd.Dir = cfEnv("VIRTUAL_ENV="+venv), AppDir()
	s := cfStartCmd(t, cmd)
	if _, body := s.Get(t, "/"); !strings.Contains(body, `"executable": "`+filepath.Join(venv, "bin", "python")+`"`) {
		t.Errorf("VIRTUAL_ENV=%s: the app says %s", venv, body)
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// A worker checks the virtualenv too: recreated by another Python under
// a running master, the SIGHUP replacement refuses it in one line and the
// running worker keeps serving.
func TestConfig_VenvChangedUnderMaster(t *testing.T) {
	build, _ := vnBuildPython(t)
	venv := vnMakeVenv(t, build)
	cmd := exec.Command(binPath(t), "--app-dir", AppDir(), "--venv", venv, "--host", "127.0.0.1", "--port", "0",
		"--admin-bind", "127.0.0.1:0", "--log-format", "json", "conf_app:app")
	cmd.Env, cmd.Dir = cfEnv(), AppDir()
	s := cfStartCmd(t, cmd)
	other := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = "+other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 60*time.Second, 1, "replacement worker failed to start; the running worker keeps serving")
	if !strings.Contains(s.Logs(), "--venv "+venv+" was made by "+filepath.Join(other, "python3")) ||
		!strings.Contains(s.Logs(), "rebuild with make build PYTHON=") {
		t.Errorf("the worker's refusal is not logged:\n%s", s.Logs())
	}
	if code, body := s.Get(t, "/"); code != 200 {
		t.Errorf("after the failed replacement: %d %s", code, body)
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// vnNobodyReads reports whether uid/gid 65534 can read path, asked of the
// kernel (test -r run as that user).
func vnNobodyReads(t *testing.T, path string) bool {
	t.Helper()
	cmd := exec.Command("test", "-r", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd.Run() == nil
}

// --user nobody with files that user cannot read is refused by the master
// before it binds or forks (issue 28: with a pyenv build under /root, mode
// 0700, the worker loaded Debian's libpython 3.11.2 under a 3.11.7 build
// with only a warning, and an app directory it cannot read was a worker
// failing at import): one line naming what it cannot reach and the fix,
// exit 2. The binary's libpython when nobody cannot read it (as with the
// pyenv Python here), else the app directory (mode 0700).
func TestConfig_VenvUserAccess(t *testing.T) {
	bin := binPath(t)
	if os.Geteuid() != 0 {
		t.Skip("--user needs root")
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	needed, _ := f.DynString(elf.DT_NEEDED)
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	f.Close()
	lib := ""
	for _, n := range needed {
		if strings.HasPrefix(n, "libpython") && len(runpath) > 0 {
			lib = filepath.Join(strings.Split(runpath[0], ":")[0], n)
		}
	}
	tmp := t.TempDir()
	app := filepath.Join(tmp, "app")
	if err := os.Mkdir(app, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--user", "nobody", "--app-dir", app}
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		args = append(args, "--venv", v)
	}
	if _, err := os.Stat(lib); err == nil && !vnNobodyReads(t, lib) {
		t.Logf("nobody cannot read the build's %s: the master names it", lib)
		vnRefused(t, cfEnv(), args, "turnstile: --user nobody cannot search ", " on the way to "+lib+", the libpython this binary is built with",
			"build turnstile against a Python installed where that user can read it (make build PYTHON=")
		return
	}
	vnRefused(t, cfEnv(), args, "turnstile: --user nobody cannot read "+app+" (drwx------ root:root), the app directory",
		"give that user read access to it")
}
