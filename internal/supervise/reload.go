package supervise

import (
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// --reload: the master watches the app directory (recursively) and, when a
// .py file or a file matching --reload-include changes, restarts the
// workers one by one. A replacement that cannot import the new code (a
// syntax error) leaves the running workers serving old code; the next
// change tries again.

// reloadSettle is how long the watcher waits after the last change before
// it reloads: an editor's save is several events.
const reloadSettle = 200 * time.Millisecond

// skipDirs are never watched.
var skipDirs = map[string]bool{"__pycache__": true, "node_modules": true, "site-packages": true}

func (m *Master) watch() (io.Closer, error) {
	root := m.cfg.AppDir
	if root == "" {
		root, _ = os.Getwd()
	}
	root, _ = filepath.Abs(root)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	add := func(dir string) {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			name := d.Name()
			if p != root && (skipDirs[name] || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "pyvenv.cfg")); err == nil {
				return filepath.SkipDir // a virtualenv
			}
			if err := w.Add(p); err != nil {
				m.log.Debug("--reload: cannot watch", "dir", p, "err", err)
			}
			return nil
		})
	}
	add(root)
	for _, pat := range m.cfg.ReloadInclude {
		if _, err := path.Match(pat, ""); err != nil {
			m.log.Warn("--reload-include: not a glob pattern; it matches no file", "pattern", pat, "err", err)
		}
	}
	m.log.Info("--reload: watching for changes", "dir", root, "include", m.cfg.ReloadInclude)
	go func() {
		changed := map[string]bool{}
		var settle <-chan time.Time
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Create) {
					if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
						add(ev.Name)
						continue
					}
				}
				if ev.Has(fsnotify.Chmod) || !m.reloadMatch(root, ev.Name) {
					continue
				}
				changed[ev.Name] = true
				settle = time.After(reloadSettle)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				m.log.Warn("--reload: watcher error", "err", err)
			case <-settle:
				settle = nil
				files := make([]string, 0, len(changed))
				for f := range changed {
					rel, err := filepath.Rel(root, f)
					if err != nil {
						rel = f
					}
					files = append(files, rel)
				}
				sort.Strings(files)
				clear(changed)
				m.post(event{kind: evReload, text: strings.Join(files, ", ")})
			}
		}
	}()
	return w, nil
}

// reloadMatch reports whether a change to file triggers a reload: a .py
// file, or a --reload-include pattern matching its name (or its path
// relative to root, for a pattern with a slash).
func (m *Master) reloadMatch(root, file string) bool {
	base := filepath.Base(file)
	if strings.HasSuffix(base, ".py") {
		return true
	}
	rel, err := filepath.Rel(root, file)
	if err != nil {
		rel = base
	}
	rel = filepath.ToSlash(rel)
	for _, pat := range m.cfg.ReloadInclude {
		subject := base
		if strings.Contains(pat, "/") {
			subject = rel
		}
		if ok, _ := path.Match(pat, subject); ok {
			return true
		}
	}
	return false
}
