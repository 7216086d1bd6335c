package static

import "strings"

// Path verdicts: what a request path under a mount may be answered with
// before the filesystem is touched (case B36).
const (
	pathOK       = 0
	pathBad      = 400 // malformed: 400, never the app
	pathRefused  = 1   // a dot segment: answered 404, never the app
	pathNotFound = 404 // cannot name a file under the mount: a miss
)

// splitPath splits raw, a still percent-encoded absolute path
// (http1.Request.Path), into its percent-decoded segments. The leading "/"
// gives no segment; a trailing "/" gives a final "". It fails (ok false)
// on a bad percent-escape (RFC 3986 §2.1: "%" HEXDIG HEXDIG) or a path not
// starting with "/". Segments share raw's bytes when they hold no escape.
func splitPath(raw string, segs []string) ([]string, bool) {
	if raw == "" || raw[0] != '/' {
		return segs, false
	}
	raw = raw[1:]
	for {
		i := strings.IndexByte(raw, '/')
		s := raw
		if i >= 0 {
			s = raw[:i]
		}
		if strings.IndexByte(s, '%') >= 0 {
			d, ok := unescape(s)
			if !ok {
				return segs, false
			}
			s = d
		}
		segs = append(segs, s)
		if i < 0 {
			return segs, true
		}
		raw = raw[i+1:]
	}
}

// unescape percent-decodes s (RFC 3986 §2.1). "+" stays "+": a path is not
// a form.
func unescape(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		h, l := unhex(s[i+1]), unhex(s[i+2])
		if h < 0 || l < 0 {
			return "", false
		}
		b = append(b, byte(h<<4|l))
		i += 2
	}
	return string(b), true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// checkSegments decides whether the decoded segments below a mount may name
// a file (case B36). Traversal protection works on the decoded segments
// (RFC 3986 §5.2.4 removes dot segments after decoding): a "." or ".."
// segment is refused outright rather than resolved, so that no path can
// step above the mount or name the same file two ways, and symlinks inside
// the mount are a separate, documented policy (case B38).
//
//   - pathBad (400): a segment that decodes to contain "/" (%2f) or "\"
//     (a Windows separator, %5c or literal), NUL or another control
//     character.
//   - pathRefused: a "." or ".." segment (however encoded). Answered 404,
//     like a file that is not there (case B38 wants 403 or 404 for
//     "/static/../static/app.css" in every symlink mode), but never
//     passed to the app.
//   - pathNotFound (404): an empty segment ("//", "%2f" already handled) in
//     the middle of the path, or a Windows drive ("C:") as a segment start.
//
// A final "" (trailing slash) is allowed: the caller treats it as a
// directory.
func checkSegments(segs []string) int {
	for i, s := range segs {
		if s == "" {
			if i == len(segs)-1 {
				continue
			}
			return pathNotFound
		}
		if s == "." || s == ".." {
			return pathRefused
		}
		for j := 0; j < len(s); j++ {
			c := s[j]
			if c < 0x20 || c == 0x7f || c == '/' || c == '\\' {
				return pathBad
			}
		}
		if len(s) >= 2 && s[1] == ':' && isLetter(s[0]) {
			return pathNotFound
		}
	}
	return pathOK
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// matchPrefix reports whether the decoded segments start with prefix's
// segments, and returns the rest.
func matchPrefix(segs, prefix []string) ([]string, bool) {
	if len(segs) < len(prefix) {
		return nil, false
	}
	for i, p := range prefix {
		if segs[i] != p {
			return nil, false
		}
	}
	return segs[len(prefix):], true
}
