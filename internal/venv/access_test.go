package venv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckAccess runs as any user: CheckAccess reads modes, it does not
// switch users. nobody is a credential that owns none of the files.
func TestCheckAccess(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // t.TempDir is 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	if os.Getuid() == 65534 {
		nobody = &syscall.Credential{Uid: 65533, Gid: 65533}
	}
	mkdir := func(p string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	build := fakePython(t, mkdir(filepath.Join(root, "py"), 0o755), "python3.11")
	b := Build{Executable: build, Version: "3.11.7"}
	venv := mkdir(filepath.Join(root, "venv"), 0o755)
	if err := os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = "+filepath.Dir(build)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(filepath.Join(venv, "bin"), 0o755)
	py := filepath.Join(venv, "bin", "python")
	if err := os.Symlink(build, py); err != nil {
		t.Fatal(err)
	}
	hidden := mkdir(filepath.Join(root, "hidden"), 0o700)
	hiddenPy := fakePython(t, filepath.Join(hidden, "py"), "python3.11")
	hiddenVenvPy := filepath.Join(mkdir(filepath.Join(root, "venv2", "bin"), 0o755), "python")
	if err := os.Symlink(hiddenPy, hiddenVenvPy); err != nil {
		t.Fatal(err)
	}
	open := mkdir(filepath.Join(root, "app"), 0o755)
	closed := mkdir(filepath.Join(root, "closed"), 0o700)
	inside := mkdir(filepath.Join(hidden, "app"), 0o755)
	group := mkdir(filepath.Join(root, "group"), 0o750)
	if err := os.Chown(group, 0, 65534); err != nil && os.Getuid() == 0 {
		t.Fatal(err)
	}

	for _, c := range []struct {
		id   string
		cred *syscall.Credential
		w    Worker
		want string // "" = nil
	}{
		{"readable", nobody, Worker{Python: py, Venv: venv, AppDir: open}, ""},
		{"no-user", nil, Worker{Python: py, AppDir: closed}, ""},
		{"root", &syscall.Credential{}, Worker{Python: py, AppDir: closed}, ""},
		{"app-dir", nobody, Worker{Python: py, Venv: venv, AppDir: closed},
			"--user nobody cannot read " + closed + " (drwx------ "},
		{"app-dir-parent", nobody, Worker{Python: py, AppDir: inside},
			"--user nobody cannot search " + hidden + " (drwx------ "},
		{"python-behind-symlink", nobody, Worker{Python: hiddenVenvPy, AppDir: open},
			"--user nobody cannot search " + hidden + " (drwx------ "},
		{"group-member", &syscall.Credential{Uid: 65534, Gid: 65534}, Worker{Python: py, AppDir: group}, ""},
	} {
		t.Run(c.id, func(t *testing.T) {
			if c.id == "group-member" && os.Getuid() != 0 {
				t.Skip("chown needs root")
			}
			err := CheckAccess("--user nobody", c.cred, b, c.w)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("CheckAccess = %v; want nil", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("CheckAccess = %v; want one line starting %q", err, c.want)
			}
		})
	}
}
