package websocket

// permessage-deflate negotiation (RFC 7692 §5, §7.1) for the handshake:
// gorilla's Upgrader accepts any offer that names the extension, whatever
// its parameters, and answers with one fixed line.

import "strings"

// deflateAnswer is what the server does on the wire once permessage-deflate
// is negotiated: gorilla compresses each message with a fresh compressor
// (server_no_context_takeover) and inflates each with a fresh inflater, so
// the client must not keep its context either (client_no_context_takeover,
// which a server may ask for whether or not it was offered, RFC 7692
// §7.1.1.2). Both inflate and deflate use compress/flate's 32 KiB window.
const deflateAnswer = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

// NegotiateDeflate picks the first permessage-deflate offer in the client's
// Sec-WebSocket-Extensions fields that the server can honour and returns
// the response's value, or "" to go without the extension (RFC 7692 §5:
// the handshake completes; the client then fails it or goes on without
// compression). An offer is declined (RFC 7692 §5, §7) when:
//
//   - it has a parameter RFC 7692 §7.1 does not define for an offer, or one
//     twice, or a value where none is allowed (the *_no_context_takeover
//     parameters), or a window size that is not 8..15 without leading zeros
//     (§7.1.2);
//   - it asks server_max_window_bits below 15: compress/flate always uses a
//     32 KiB window, and §7.1.2.1 lets the server decline such an offer.
//
// server_max_window_bits=15 is honoured and echoed (§7.1.2.1: the response
// carries it); client_max_window_bits, with or without a value, needs no
// answer: our inflater takes any window up to 32 KiB (§7.1.2.2).
// server_no_context_takeover and client_no_context_takeover are always in
// the answer (deflateAnswer). An element that does not parse as an
// extension (RFC 6455 §9.1) is skipped like a declined offer.
func NegotiateDeflate(fields []string) string {
	for _, f := range fields {
		for _, elem := range splitList(f) {
			name, params, ok := parseExtension(elem)
			if !ok || name != "permessage-deflate" {
				continue
			}
			if ans, ok := deflateOffer(params); ok {
				return ans
			}
		}
	}
	return ""
}

type extParam struct {
	name, value string
	hasValue    bool
}

// deflateOffer judges one permessage-deflate offer (see NegotiateDeflate).
func deflateOffer(params []extParam) (string, bool) {
	seen := map[string]bool{}
	maxBits15 := false
	for _, p := range params {
		if seen[p.name] {
			return "", false
		}
		seen[p.name] = true
		switch p.name {
		case "server_no_context_takeover", "client_no_context_takeover":
			if p.hasValue {
				return "", false
			}
		case "server_max_window_bits":
			if !p.hasValue {
				return "", false
			}
			bits, ok := windowBits(p.value)
			if !ok || bits != 15 {
				return "", false
			}
			maxBits15 = true
		case "client_max_window_bits":
			if p.hasValue {
				if _, ok := windowBits(p.value); !ok {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	if maxBits15 {
		return deflateAnswer + "; server_max_window_bits=15", true
	}
	return deflateAnswer, true
}

// windowBits parses a window size: a decimal 8..15 without leading zeros
// (RFC 7692 §7.1.2.1, §7.1.2.2).
func windowBits(v string) (int, bool) {
	switch {
	case len(v) == 1 && (v[0] == '8' || v[0] == '9'):
		return int(v[0] - '0'), true
	case len(v) == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5':
		return 10 + int(v[1]-'0'), true
	}
	return 0, false
}

// splitList splits a field value at the commas outside quoted strings.
func splitList(v string) []string {
	out, _ := splitOutsideQuotes(v, ',')
	return out
}

// parseExtension parses one list element (RFC 6455 §9.1):
//
//	extension = extension-token *( ";" extension-param )
//	extension-param = token [ "=" (token | quoted-string) ]
//
// A quoted value must be a token once unescaped. An empty element (the
// list rule allows them) has no name and ok false.
func parseExtension(elem string) (name string, params []extParam, ok bool) {
	parts := splitParams(elem)
	if parts == nil {
		return "", nil, false
	}
	name = strings.Trim(parts[0], " \t")
	if !isToken([]byte(name)) {
		return "", nil, false
	}
	for _, part := range parts[1:] {
		k, v, has := strings.Cut(part, "=")
		k = strings.Trim(k, " \t")
		if !isToken([]byte(k)) {
			return "", nil, false
		}
		p := extParam{name: k, hasValue: has}
		if has {
			v = strings.Trim(v, " \t")
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = unquote(v[1 : len(v)-1])
			}
			if !isToken([]byte(v)) {
				return "", nil, false
			}
			p.value = v
		}
		params = append(params, p)
	}
	return name, params, true
}

// splitParams splits an element at the semicolons outside quoted strings;
// nil for an unterminated quoted string.
func splitParams(elem string) []string {
	out, open := splitOutsideQuotes(elem, ';')
	if open {
		return nil
	}
	return out
}

// splitOutsideQuotes splits v at each sep outside quoted strings (RFC 9110
// §5.6.4, with quoted-pair), and reports whether a quoted string is left
// open at the end.
func splitOutsideQuotes(v string, sep byte) (parts []string, open bool) {
	quoted, esc, from := false, false, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case esc:
			esc = false
		case quoted && c == '\\':
			esc = true
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, v[from:i])
			from = i + 1
		}
	}
	return append(parts, v[from:]), quoted
}

// unquote removes quoted-pair backslashes; a quote inside is left, which
// isToken then refuses.
func unquote(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
