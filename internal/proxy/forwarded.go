package proxy

import "turnstile/internal/http1"

// fwdElem is one forwarded-element of RFC 7239 §4: the parameters this
// server uses. A nil field was absent.
type fwdElem struct {
	forNode, proto, host []byte
}

// maxFwdElems bounds the elements read from Forwarded fields; a longer
// chain is ignored as malformed (the field-size limit bounds it anyway).
const maxFwdElems = 64

// resolveForwarded fills res from the Forwarded fields (RFC 7239), walked
// as Resolve says. A field that does not parse makes the whole header
// ignored: without it, the elements cannot be matched to their hops.
func resolveForwarded(res *Result, fields []http1.Field, trusted *AllowList) {
	var buf [8]fwdElem
	elems := buf[:0]
	for i := range fields {
		if !eqFold(fields[i].Name, "forwarded") {
			continue
		}
		var ok bool
		if elems, ok = parseForwarded(elems, fields[i].Value); !ok {
			return
		}
	}
	if len(elems) == 0 {
		return
	}
	ci := -1 // the client's element
	for i := len(elems) - 1; i >= 0; i-- {
		ip, port, ok := parseNode(elems[i].forNode)
		if !ok {
			ci = i // "unknown", obfuscated, absent or garbage: no address
			break
		}
		if !trusted.Contains(ip) {
			res.Client, res.ClientPort, ci = ip, port, i
			break
		}
		if i == 0 { // every hop trusted: the leftmost
			res.Client, res.ClientPort, ci = ip, port, 0
		}
	}
	for i := ci; i < len(elems); i++ {
		if elems[i].proto != nil {
			res.Scheme = schemeOf(elems[i].proto)
			break
		}
	}
	for i := ci; i < len(elems); i++ {
		if elems[i].host != nil {
			if validHost(elems[i].host) {
				res.Host = elems[i].host
			}
			break
		}
	}
}

// parseForwarded appends the elements of one Forwarded field value to
// elems (RFC 7239 §4):
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//
// Parameter names are case-insensitive; a parameter may occur once per
// element; empty list elements are skipped. ok is false on a syntax error.
func parseForwarded(elems []fwdElem, v []byte) (_ []fwdElem, ok bool) {
	var cur fwdElem
	pairs := 0
	flush := func() bool {
		if pairs > 0 {
			if len(elems) >= maxFwdElems {
				return false
			}
			elems = append(elems, cur)
		}
		cur, pairs = fwdElem{}, 0
		return true
	}
	i := 0
	for {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i == len(v) {
			if !flush() {
				return elems, false
			}
			return elems, true
		}
		switch v[i] {
		case ',':
			if !flush() {
				return elems, false
			}
			i++
			continue
		case ';':
			i++
			continue
		}
		// forwarded-pair
		start := i
		for i < len(v) && isTchar[v[i]] {
			i++
		}
		name := v[start:i]
		if len(name) == 0 || i == len(v) || v[i] != '=' {
			return elems, false
		}
		i++
		var val []byte
		if i < len(v) && v[i] == '"' {
			var ok bool
			val, i, ok = quotedString(v, i)
			if !ok {
				return elems, false
			}
		} else {
			start = i
			for i < len(v) && isTchar[v[i]] {
				i++
			}
			val = v[start:i]
			if len(val) == 0 {
				return elems, false
			}
		}
		var dst *[]byte
		switch {
		case eqFold(name, "for"):
			dst = &cur.forNode
		case eqFold(name, "proto"):
			dst = &cur.proto
		case eqFold(name, "host"):
			dst = &cur.host
		}
		if dst != nil {
			if *dst != nil {
				return elems, false // §4: a parameter MUST NOT occur twice in an element
			}
			*dst = val
		}
		pairs++
		// After a value: OWS, then ';', ',' or the end.
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i < len(v) && v[i] != ';' && v[i] != ',' {
			return elems, false
		}
	}
}

// quotedString reads the quoted-string at v[i] (RFC 9110 §5.6.4) and
// returns its content (unescaped: a copy only when it has a quoted-pair)
// and the index after the closing quote.
func quotedString(v []byte, i int) (val []byte, next int, ok bool) {
	i++ // the opening quote
	start := i
	var out []byte
	for i < len(v) {
		c := v[i]
		switch {
		case c == '"':
			if out != nil {
				return out, i + 1, true
			}
			return v[start:i:i], i + 1, true
		case c == '\\':
			if i+1 >= len(v) {
				return nil, 0, false
			}
			if out == nil {
				out = append([]byte(nil), v[start:i]...)
			}
			out = append(out, v[i+1])
			i += 2
		default:
			if out != nil {
				out = append(out, c)
			}
			i++
		}
	}
	return nil, 0, false
}

// isTchar per RFC 9110 §5.6.2.
var isTchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-32] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
