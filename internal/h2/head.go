package h2

import (
	"strconv"
	"strings"

	"turnstile/internal/http1"
)

// buildHead checks the field section of a request's HEADERS and fills hd.
// It reports false for a malformed request (RFC 9113 §8.1.1: "treated as
// a stream error of type PROTOCOL_ERROR"). readBlock has already refused
// uppercase and non-token names, values with NUL, CR or LF, pseudo-header
// fields after regular ones, repeated pseudo-header fields and request
// and response ones mixed (§8.2.1, §8.3). The strings of f are copied into
// one buffer owned by hd.
func buildHead(f *fieldBlock, hd *http1.StreamHead, extConnect bool) bool {
	var method, scheme, path, authority, host, protocol string
	var hasPath, hasHost, hasProtocol bool
	cl, ncookie, size := int64(-1), 0, 0
	for _, hf := range f.Fields {
		if hf.IsPseudo() {
			switch hf.Name {
			case ":method":
				method = hf.Value
			case ":scheme":
				scheme = hf.Value
			case ":path":
				path, hasPath = hf.Value, true
			case ":authority":
				authority = hf.Value
			case ":protocol":
				// RFC 8441 §4: offered by SETTINGS_ENABLE_CONNECT_PROTOCOL
				// only; without it the field is undefined (below).
				if !extConnect {
					return false
				}
				protocol, hasProtocol = hf.Value, true
			default:
				// §8.3: "Endpoints MUST treat a request or response that
				// contains undefined or invalid pseudo-header fields as
				// malformed" (:status in a request; :protocol when RFC
				// 8441 is not offered).
				return false
			}
			continue
		}
		// §8.2.1: "A field value MUST NOT start or end with an ASCII
		// whitespace character (ASCII SP or HTAB, 0x20 or 0x09)."
		if v := hf.Value; v != "" && (isWS(v[0]) || isWS(v[len(v)-1])) {
			return false
		}
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			// §8.2.2: "Any message containing connection-specific header
			// fields MUST be treated as malformed."
			return false
		case "te":
			// §8.2.2: "The only exception to this is the TE header field,
			// which MAY be present in an HTTP/2 request; when it is, it
			// MUST NOT contain any value other than "trailers"."
			if hf.Value != "trailers" {
				return false
			}
		case "host":
			if hasHost {
				return false // RFC 9110 §7.2: one Host
			}
			host, hasHost = hf.Value, true
			continue // the app sees the host once, from :authority
		case "content-length":
			n, err := strconv.ParseInt(hf.Value, 10, 64)
			if err != nil || n < 0 || hf.Value[0] == '+' || (cl >= 0 && cl != n) {
				return false
			}
			cl = n
		case "cookie":
			ncookie++
		case "expect":
			if strings.EqualFold(hf.Value, "100-continue") {
				hd.ExpectContinue = true
			}
		}
		size += len(hf.Name) + len(hf.Value)
	}
	// §8.3.1: "All HTTP/2 requests MUST include exactly one valid value
	// for the ":method", ":scheme", and ":path" pseudo-header fields,
	// unless they are CONNECT requests"; ":path" "MUST NOT be empty".
	if method == "" {
		return false
	}
	if hasProtocol {
		// RFC 8441 §4: an extended CONNECT carries ":protocol" on a
		// CONNECT only, and then ":scheme" and ":path" as other requests
		// do; ":authority" names the target.
		if method != "CONNECT" || protocol == "" || scheme == "" || path == "" || authority == "" {
			return false
		}
	} else if method == "CONNECT" {
		// §8.5: ":scheme" and ":path" "MUST be omitted", ":authority"
		// present. The request reaches http1, which refuses it (400) as
		// it refuses HTTP/1 CONNECT.
		if scheme != "" || hasPath || authority == "" {
			return false
		}
	} else if scheme == "" || path == "" {
		return false
	}
	// §8.3.1: "A server SHOULD treat a request as malformed if it contains
	// a Host header field that identifies an entity that differs from the
	// entity in the ":authority" pseudo-header field."
	if authority != "" && hasHost && !strings.EqualFold(host, authority) {
		return false
	}
	if authority == "" {
		authority = host
	}

	buf := make([]byte, 0, size+len(method)+len(path)+len(authority)+len(protocol)+2*ncookie)
	take := func(s string) []byte {
		n := len(buf)
		buf = append(buf, s...)
		return buf[n:len(buf):len(buf)]
	}
	hd.Method, hd.Path, hd.Authority = take(method), take(path), take(authority)
	if hasProtocol {
		hd.Protocol = take(protocol)
	}
	hd.Header = make([]http1.Field, 0, len(f.Fields))
	cookie := -1
	for _, hf := range f.Fields {
		if hf.IsPseudo() || hf.Name == "host" {
			continue
		}
		if hf.Name == "cookie" && ncookie > 1 {
			// §8.2.3: "these MUST be concatenated into a single octet
			// string using the two-octet delimiter of 0x3b, 0x20 (the
			// ASCII string "; ") before being passed into a non-HTTP/2
			// context".
			if cookie < 0 {
				cookie = len(hd.Header)
				hd.Header = append(hd.Header, http1.Field{Name: take("cookie")})
				start := len(buf)
				for _, c := range f.Fields {
					if c.Name == "cookie" {
						if len(buf) > start {
							buf = append(buf, "; "...)
						}
						buf = append(buf, c.Value...)
					}
				}
				hd.Header[cookie].Value = buf[start:len(buf):len(buf)]
			}
			continue
		}
		hd.Header = append(hd.Header, http1.Field{Name: take(hf.Name), Value: take(hf.Value)})
	}
	hd.ContentLength = cl
	hd.EndStream = f.StreamEnded()
	hd.TooLarge = f.Truncated
	if hd.EndStream {
		hd.ExpectContinue = false
	}
	return true
}

// checkTrailer checks a trailer section (RFC 9113 §8.1: "Trailers MUST
// NOT include pseudo-header fields") and returns its fields.
func checkTrailer(f *fieldBlock) ([]http1.Field, bool) {
	fs := make([]http1.Field, 0, len(f.Fields))
	for _, hf := range f.Fields {
		if hf.IsPseudo() {
			return nil, false
		}
		if v := hf.Value; v != "" && (isWS(v[0]) || isWS(v[len(v)-1])) {
			return nil, false
		}
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te":
			return nil, false
		}
		fs = append(fs, http1.Field{Name: []byte(hf.Name), Value: []byte(hf.Value)})
	}
	return fs, true
}

func isWS(c byte) bool { return c == ' ' || c == '\t' }
