package static

import (
	"slices"
	"testing"
)

// Traversal on decoded segments (case B36; RFC 3986 §5.2.4).
func TestCleanPath(t *testing.T) {
	tests := []struct {
		id   string
		raw  string
		want int      // checkSegments verdict below the mount, or -1: splitPath fails
		segs []string // decoded segments, when want >= 0
	}{
		{"plain", "/static/a.txt", pathOK, []string{"static", "a.txt"}},
		{"nested", "/static/css/app.css", pathOK, []string{"static", "css", "app.css"}},
		{"escaped-name", "/static/a%20b.txt", pathOK, []string{"static", "a b.txt"}},
		{"plus-kept", "/static/a+b", pathOK, []string{"static", "a+b"}},
		{"utf8", "/static/%C3%A9.txt", pathOK, []string{"static", "é.txt"}},
		{"trailing-slash", "/static/css/", pathOK, []string{"static", "css", ""}},
		{"dotfile", "/static/.well-known", pathOK, []string{"static", ".well-known"}},
		{"dots-in-name", "/static/a..b", pathOK, []string{"static", "a..b"}},
		{"three-dots", "/static/...", pathOK, []string{"static", "..."}},

		{"dotdot", "/static/../secret.txt", pathRefused, nil},
		{"dot", "/static/./a.txt", pathRefused, nil},
		{"enc-dotdot", "/static/%2e%2e/secret.txt", pathRefused, nil},
		{"enc-dotdot-upper", "/static/%2E%2E/secret.txt", pathRefused, nil},
		{"half-enc-dotdot", "/static/.%2e/secret.txt", pathRefused, nil},
		{"enc-slash", "/static/..%2fsecret.txt", pathBad, nil},
		{"enc-backslash", "/static/..%5csecret.txt", pathBad, nil},
		{"backslash", `/static/..\secret.txt`, pathBad, nil},
		{"enc-abs", "/static/%2fetc%2fpasswd", pathBad, nil},
		{"nul", "/static/a.txt%00.png", pathBad, nil},
		{"ctl", "/static/a%0a.txt", pathBad, nil},
		{"del", "/static/a%7f", pathBad, nil},
		{"trailing-dotdot", "/static/css/..", pathRefused, nil},

		{"double-slash-abs", "/static//etc/passwd", pathNotFound, nil},
		{"drive", "/static/C:/Windows/win.ini", pathNotFound, nil},
		{"drive-lower", "/static/c:", pathNotFound, nil},
		{"drive-enc", "/static/C%3a/Windows/win.ini", pathNotFound, nil},

		{"bad-escape", "/static/%zz", -1, nil},
		{"short-escape", "/static/%2", -1, nil},
		{"relative", "static/a.txt", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			segs, ok := splitPath(tt.raw, nil)
			if tt.want < 0 {
				if ok {
					t.Fatalf("splitPath(%q) = %q, ok; want failure", tt.raw, segs)
				}
				return
			}
			if !ok {
				t.Fatalf("splitPath(%q) failed", tt.raw)
			}
			if tt.segs != nil && !slices.Equal(segs, tt.segs) {
				t.Errorf("splitPath(%q) = %q; want %q", tt.raw, segs, tt.segs)
			}
			rest, ok := matchPrefix(segs, []string{"static"})
			if !ok {
				t.Fatalf("matchPrefix(%q) did not match /static", segs)
			}
			if got := checkSegments(rest); got != tt.want {
				t.Errorf("checkSegments(%q) = %d; want %d", rest, got, tt.want)
			}
		})
	}
}

func TestMatchPrefix(t *testing.T) {
	tests := []struct {
		raw    string
		prefix []string
		ok     bool
	}{
		{"/static/a", []string{"static"}, true},
		{"/static", []string{"static"}, true},
		{"/staticx/a", []string{"static"}, false},
		{"/%73tatic/a", []string{"static"}, true}, // decoded before matching
		{"/a/b/c", []string{"a", "b"}, true},
		{"/a", []string{"a", "b"}, false},
		{"/anything", nil, true}, // mount at "/"
	}
	for _, tt := range tests {
		segs, _ := splitPath(tt.raw, nil)
		if _, ok := matchPrefix(segs, tt.prefix); ok != tt.ok {
			t.Errorf("matchPrefix(%q, %q) = %v; want %v", tt.raw, tt.prefix, ok, tt.ok)
		}
	}
}

func TestParseMount(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		in     string
		prefix string // "" = error
	}{
		{"/static=" + dir, "/static"},
		{"/static/=" + dir, "/static"},
		{"/=" + dir, "/"},
		{"/a/b=" + dir, "/a/b"},
		{"static=" + dir, ""},
		{"/a/../b=" + dir, ""},
		{"/a//b=" + dir, ""},
		{"/a%2fb=" + dir, ""},
		{"/static", ""},
		{"/static=" + dir + "/missing", ""},
	} {
		m, err := ParseMount(tt.in)
		if tt.prefix == "" {
			if err == nil {
				t.Errorf("ParseMount(%q) = %+v; want an error", tt.in, m)
			}
			continue
		}
		if err != nil || m.Prefix != tt.prefix || m.Dir != dir {
			t.Errorf("ParseMount(%q) = %+v, %v; want prefix %q dir %q", tt.in, m, err, tt.prefix, dir)
		}
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		v     string
		size  int64
		kind  int
		start int64
		n     int64
	}{
		{"bytes=0-9", 100, rangeOne, 0, 10},
		{"bytes=10-", 100, rangeOne, 10, 90},
		{"bytes=-10", 100, rangeOne, 90, 10},
		{"bytes=-1000", 100, rangeOne, 0, 100},
		{"bytes=90-1000", 100, rangeOne, 90, 10},
		{"BYTES=0-0", 100, rangeOne, 0, 1},
		{"bytes= 5-6", 100, rangeOne, 5, 2},

		{"bytes=100-", 100, rangeNone, 0, 0},
		{"bytes=200-300", 100, rangeNone, 0, 0},
		{"bytes=-0", 100, rangeNone, 0, 0},
		{"bytes=100-,200-", 100, rangeNone, 0, 0},

		{"bytes=0-1,5-6", 100, rangeIgnore, 0, 0}, // several: whole file
		{"bytes=200-,0-1", 100, rangeIgnore, 0, 0},
		{"bytes=9-1", 100, rangeIgnore, 0, 0},
		{"bytes=a-b", 100, rangeIgnore, 0, 0},
		{"bytes=1", 100, rangeIgnore, 0, 0},
		{"items=0-1", 100, rangeIgnore, 0, 0},
		{"bytes=", 100, rangeIgnore, 0, 0},
		{"bytes=0-", 0, rangeIgnore, 0, 0},
	}
	for _, tt := range tests {
		r, kind := parseRange(tt.v, tt.size)
		if kind != tt.kind || (kind == rangeOne && (r.start != tt.start || r.length != tt.n)) {
			t.Errorf("parseRange(%q, %d) = %+v, %d; want {%d %d}, %d", tt.v, tt.size, r, kind, tt.start, tt.n, tt.kind)
		}
	}
}

func TestCodingQ(t *testing.T) {
	tests := []struct {
		ae       string
		br, gzip int
	}{
		{"gzip, deflate, br", 1000, 1000},
		{"gzip", 0, 1000},
		{"br;q=0.5, gzip;q=0.8", 500, 800},
		{"br;q=0, gzip", 0, 1000},
		{"*", 1000, 1000},
		{"*;q=0.1, br;q=0", 0, 100},
		{"x-gzip", 0, 1000},
		{"identity", 0, 0},
		{"BR ; Q=1.000", 1000, 0},
		{"br;q=2", 0, 0},
		{"br;q=0.0001", 0, 0},
	}
	for _, tt := range tests {
		if br, gz := codingQ(tt.ae); br != tt.br || gz != tt.gzip {
			t.Errorf("codingQ(%q) = %d, %d; want %d, %d", tt.ae, br, gz, tt.br, tt.gzip)
		}
	}
}

func TestETagMatch(t *testing.T) {
	const e = `"a-b"`
	tests := []struct {
		list        string
		weak, match bool
	}{
		{`"a-b"`, false, true},
		{`*`, false, true},
		{`"x", "a-b"`, false, true},
		{`W/"a-b"`, false, false},
		{`W/"a-b"`, true, true},
		{`"a-b-br"`, true, false},
		{`"x,y", "a-b"`, true, true},
		{``, true, false},
	}
	for _, tt := range tests {
		if got := etagMatch(tt.list, e, tt.weak); got != tt.match {
			t.Errorf("etagMatch(%q, weak=%v) = %v; want %v", tt.list, tt.weak, got, tt.match)
		}
	}
}

func TestContentType(t *testing.T) {
	for name, want := range map[string]string{
		"app.js":      "text/javascript; charset=utf-8",
		"app.css":     "text/css; charset=utf-8",
		"logo.svg":    "image/svg+xml",
		"m.wasm":      "application/wasm",
		"f.woff2":     "font/woff2",
		"INDEX.HTML":  "text/html; charset=utf-8",
		"blob":        "application/octet-stream",
		"x.unknownzz": "application/octet-stream",
	} {
		if got := contentType(name); got != want {
			t.Errorf("contentType(%q) = %q; want %q", name, got, want)
		}
	}
}
