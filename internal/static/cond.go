package static

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Conditional requests (RFC 9110 §13), ranges (§14) and content coding
// negotiation (§12.5.3). Inputs are raw field values; nothing here
// allocates on the common path.

// etagMatch reports whether the If-Match / If-None-Match list (RFC 9110
// §13.1.1, §13.1.2) matches etag (a quoted strong tag we generated). "*"
// matches any current representation. weak selects the weak comparison
// (§8.8.3.2: If-None-Match), which ignores a "W/" prefix; the strong one
// (If-Match) never matches a weak tag.
func etagMatch(list, etag string, weak bool) bool {
	list = trimOWS(list)
	if list == "*" {
		return true
	}
	for list != "" {
		var item string
		item, list = nextListItem(list)
		if strings.HasPrefix(item, "W/") {
			if !weak {
				continue
			}
			item = item[2:]
		}
		if item == etag {
			return true
		}
	}
	return false
}

// nextListItem returns the first element of a comma-separated list (RFC
// 9110 §5.6.1) and the rest; commas inside a quoted entity-tag are kept.
func nextListItem(s string) (string, string) {
	s = strings.TrimLeft(s, " \t,")
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				return trimOWS(s[:i]), s[i+1:]
			}
		}
	}
	return trimOWS(s), ""
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseDate parses an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate and the two
// obsolete forms). ok is false for anything else; such a field is ignored
// (§13.1.3, §13.1.4).
func parseDate(s string) (time.Time, bool) {
	t, err := http.ParseTime(trimOWS(s))
	return t, err == nil
}

// byteRange is one satisfiable range: [start, start+length).
type byteRange struct{ start, length int64 }

// Range outcomes.
const (
	rangeIgnore = iota // no usable Range: send the whole representation (200)
	rangeOne           // one satisfiable range: 206
	rangeNone          // no satisfiable range: 416 (RFC 9110 §15.5.17)
)

// parseRange evaluates a Range field (RFC 9110 §14.1.2, §14.2) against a
// representation of size bytes. A unit other than "bytes" or a syntax
// error is ignored (§14.2: a server MAY ignore Range). One range gives
// rangeOne. Several ranges: if none is satisfiable, rangeNone; else the
// whole representation is sent (rangeIgnore) rather than
// multipart/byteranges, which §14.2 allows. An empty representation has
// nothing to range over: rangeIgnore.
func parseRange(s string, size int64) (byteRange, int) {
	s = trimOWS(s)
	if len(s) < 6 || !strings.EqualFold(s[:6], "bytes=") || size == 0 {
		return byteRange{}, rangeIgnore
	}
	s = s[6:]
	var first byteRange
	n, satisfiable := 0, 0
	for s != "" {
		var spec string
		spec, s = nextListItem(s)
		if spec == "" {
			continue
		}
		dash := strings.IndexByte(spec, '-')
		if dash < 0 {
			return byteRange{}, rangeIgnore
		}
		a, b := spec[:dash], spec[dash+1:]
		var r byteRange
		ok := true
		if a == "" {
			// suffix-range: the last b bytes (§14.1.2).
			k, err := parseDigits(b)
			if err {
				return byteRange{}, rangeIgnore
			}
			if k == 0 {
				ok = false
			} else {
				k = min(k, size)
				r = byteRange{size - k, k}
			}
		} else {
			start, err := parseDigits(a)
			if err {
				return byteRange{}, rangeIgnore
			}
			end := size - 1
			if b != "" {
				e, err := parseDigits(b)
				if err || e < start {
					return byteRange{}, rangeIgnore
				}
				end = min(e, size-1)
			}
			if start >= size {
				ok = false // §14.1.2: first-pos past the end
			} else {
				r = byteRange{start, end - start + 1}
			}
		}
		n++
		if ok {
			if satisfiable == 0 {
				first = r
			}
			satisfiable++
		}
	}
	switch {
	case n == 0:
		return byteRange{}, rangeIgnore
	case satisfiable == 0:
		return byteRange{}, rangeNone
	case n == 1:
		return first, rangeOne
	}
	return byteRange{}, rangeIgnore
}

// parseDigits parses 1*DIGIT; err on anything else or overflow.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, true
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, true
		}
		v = v*10 + int64(c-'0')
	}
	return v, false
}

// codingQ returns the q-values (RFC 9110 §12.5.3, §12.4.2) that an
// Accept-Encoding value gives "br" and "gzip" (also "x-gzip"), in
// thousandths: 0 means not acceptable. A coding not listed takes the
// value of "*" if present, else 0.
func codingQ(ae string) (br, gzip int) {
	br, gzip, star := -1, -1, -1
	for ae != "" {
		var item string
		item, ae = nextListItem(ae)
		name, params, _ := strings.Cut(item, ";")
		name = trimOWS(name)
		q := parseQ(params)
		switch {
		case strings.EqualFold(name, "br"):
			br = q
		case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
			gzip = q
		case name == "*":
			star = q
		}
	}
	if br < 0 {
		br = max(star, 0)
	}
	if gzip < 0 {
		gzip = max(star, 0)
	}
	return br, gzip
}

// parseQ finds "q=" among ";"-separated parameters and returns it in
// thousandths (qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )).
// No q: 1000. A malformed q counts as 0 (not acceptable): safer than
// guessing.
func parseQ(params string) int {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(trimOWS(p), "=")
		if !ok || !strings.EqualFold(trimOWS(k), "q") {
			continue
		}
		v = trimOWS(v)
		if v == "" || (v[0] != '0' && v[0] != '1') {
			return 0
		}
		q := int(v[0]-'0') * 1000
		if len(v) > 1 {
			if v[1] != '.' || len(v) > 5 {
				return 0
			}
			frac := v[2:]
			mul := 100
			for i := 0; i < len(frac); i++ {
				if frac[i] < '0' || frac[i] > '9' {
					return 0
				}
				q += int(frac[i]-'0') * mul
				mul /= 10
			}
		}
		return min(q, 1000)
	}
	return 1000
}

// appendETag appends our entity-tag for a representation: size and mtime
// (nanoseconds) in hex, plus the content coding, quoted (RFC 9110 §8.8.3).
// Each coding of a file gets its own tag, as §8.8.3 requires of distinct
// representations.
func appendETag(b []byte, size, mtimeNs int64, coding string) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, size, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, mtimeNs, 16)
	if coding != "" {
		b = append(b, '-')
		b = append(b, coding...)
	}
	return append(b, '"')
}
