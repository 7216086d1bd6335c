package wsgi

import (
	"strconv"

	"turnstile/internal/http1"
	"turnstile/internal/reqblock"
	"turnstile/internal/tlsconf"
)

// environ keys known by id: C interns each once (ts_wsgi_setup) and the
// request block carries the id instead of the name. Order is the id - 1.
var knownKeys = []string{
	"REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING",
	"CONTENT_TYPE", "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT",
	"SERVER_PROTOCOL", "REMOTE_ADDR", "REMOTE_PORT", "RAW_URI",
	"HTTP_HOST", "HTTP_USER_AGENT", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING",
	"HTTP_ACCEPT_LANGUAGE", "HTTP_CONNECTION", "HTTP_COOKIE", "HTTP_REFERER",
	"HTTP_CACHE_CONTROL", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO",
	"HTTP_AUTHORIZATION", "HTTP_ORIGIN", "HTTP_UPGRADE_INSECURE_REQUESTS",
	"HTTP_X_REQUESTED_WITH", "HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE",
	"HTTP_EXPECT", "HTTP_PRAGMA", "HTTP_SEC_FETCH_MODE",
	"wsgi.url_scheme", // sent only when not "http" (the template's); C interns "https"
}

const (
	keyRequestMethod = iota + 1
	keyScriptName
	keyPathInfo
	keyQueryString
	keyContentType
	keyContentLength
	keyServerName
	keyServerPort
	keyServerProtocol
	keyRemoteAddr
	keyRemotePort
	keyRawURI
	keyURLScheme = 33 // "wsgi.url_scheme" above
)

func init() {
	if knownKeys[keyURLScheme-1] != "wsgi.url_scheme" {
		panic("wsgi: keyURLScheme does not name wsgi.url_scheme")
	}
}

var keyID = func() map[string]uint16 {
	m := make(map[string]uint16, len(knownKeys))
	for i, k := range knownKeys {
		m[k] = uint16(i + 1)
	}
	return m
}()

// buildEnviron appends the request's environ entries (PEP 3333, "environ
// Variables") to b and returns it with the entry count. Everything that
// can be done without the GIL is done here: percent-decoding, the HTTP_*
// names, joining repeated fields.
func buildEnviron(b []byte, r *http1.Request, scriptName []byte, scratch *[]byte) ([]byte, int) {
	n := 0
	add := func(id uint16, key, val []byte) {
		b = reqblock.AppendEntry(b, id, key, val)
		n++
	}
	add(keyRequestMethod, nil, r.Method)

	// PATH_INFO: percent-decoded bytes, as latin-1 (PEP 3333, "Unicode
	// Issues"); SCRIPT_NAME is the root path, stripped from the front.
	path := reqblock.PercentDecode((*scratch)[:0], r.Path)
	*scratch = path
	if len(scriptName) > 0 && reqblock.HasPathPrefix(path, scriptName) {
		path = path[len(scriptName):]
	}
	add(keyScriptName, nil, scriptName)
	add(keyPathInfo, nil, path)
	add(keyQueryString, nil, r.RawQuery)
	add(keyRawURI, nil, r.Target)
	if r.ProtoMajor == 3 {
		add(keyServerProtocol, nil, []byte("HTTP/3"))
	} else if r.ProtoMajor == 2 {
		add(keyServerProtocol, nil, []byte("HTTP/2"))
	} else if r.ProtoMinor == 0 {
		add(keyServerProtocol, nil, []byte("HTTP/1.0"))
	} else {
		add(keyServerProtocol, nil, []byte("HTTP/1.1"))
	}
	ac := r.Addrs()
	add(keyRemoteAddr, nil, ac.RemoteHost)
	if len(ac.RemotePort) > 0 { // a Unix socket's client has none: no key, as under gunicorn
		add(keyRemotePort, nil, ac.RemotePort)
	}

	// wsgi.url_scheme: the template's "http" unless TLS or a trusted
	// proxy (internal/proxy) said https.
	https := r.Scheme == "https"
	if https {
		add(keyURLScheme, nil, []byte("https"))
	}

	// TLS, as mod_ssl names it (Apache's "SSLOptions +StdEnvVars
	// +ExportCertData"; DNs in RFC 4514 form, as mod_ssl without
	// LegacyDNStringFormat): from the connection only, never from a
	// proxy's headers.
	if ts := r.TLS; ts != nil {
		add(0, []byte("HTTPS"), []byte("on"))
		add(0, []byte("SSL_PROTOCOL"), []byte(http1.TLSVersionName(ts.Version)))
		add(0, []byte("SSL_CIPHER"), []byte(tlsconf.CipherName(ts.CipherSuite)))
		if sc := r.Certs.ServerCert(); sc != nil {
			add(0, []byte("SSL_SERVER_CERT"), sc)
		}
		if cc := r.Certs.Client(); cc != nil {
			add(0, []byte("SSL_CLIENT_VERIFY"), []byte("SUCCESS"))
			add(0, []byte("SSL_CLIENT_CERT"), cc.Chain[0])
			add(0, []byte("SSL_CLIENT_S_DN"), cc.SubjectDN)
			add(0, []byte("SSL_CLIENT_I_DN"), cc.IssuerDN)
			add(0, []byte("SSL_CLIENT_M_SERIAL"), cc.Serial)
			for i, pem := range cc.Chain[1:] {
				add(0, []byte("SSL_CLIENT_CERT_CHAIN_"+strconv.Itoa(i)), pem)
			}
		} else {
			add(0, []byte("SSL_CLIENT_VERIFY"), []byte("NONE"))
		}
	}

	// SERVER_NAME and SERVER_PORT from Host (its port, else the scheme's
	// default), else the local address.
	if host := r.Host; len(host) > 0 {
		h, p := reqblock.SplitHostPort(host)
		add(keyServerName, nil, h)
		if len(p) == 0 {
			p = []byte("80")
			if https {
				p = []byte("443")
			}
		}
		add(keyServerPort, nil, p)
	} else {
		// No Host (HTTP/1.0): the local address. On a Unix socket that
		// has no port, the scheme's default: PEP 3333 says SERVER_NAME
		// and SERVER_PORT are never empty.
		add(keyServerName, nil, ac.LocalHost)
		p := ac.LocalPort
		if len(p) == 0 {
			p = []byte("80")
			if https {
				p = []byte("443")
			}
		}
		add(keyServerPort, nil, p)
	}

	var keybuf [128]byte
	var clbuf [20]byte
	for i := range r.Header {
		name := r.Header[i].Name
		if reqblock.IndexByte(name, '_') >= 0 {
			// A name with '_' would collide with its '-' twin in the
			// environ (the header-spoofing class of bug): dropped.
			continue
		}
		if seenBefore(r.Header[:i], name) {
			continue // joined into the first occurrence below
		}
		key := envKey(keybuf[:0], name)
		val := r.Header[i].Value
		sep := ", "
		if string(key) == "HTTP_COOKIE" {
			sep = "; " // RFC 6265 §5.4
		}
		joined := false
		for j := i + 1; j < len(r.Header); j++ {
			if reqblock.EqualFold(r.Header[j].Name, name) {
				if !joined {
					val = append([]byte(nil), val...)
					joined = true
				}
				val = append(append(val, sep...), r.Header[j].Value...)
			}
		}
		id := keyID[string(key)]
		switch string(key) {
		case "HTTP_CONTENT_TYPE":
			id, key = keyContentType, nil
		case "HTTP_CONTENT_LENGTH":
			// The length http1 framed the body with, one number: repeated
			// equal values ("2, 2", RFC 9110 §8.6) are not joined.
			id, key = keyContentLength, nil
			val = strconv.AppendInt(clbuf[:0], r.ContentLength, 10)
		}
		add(id, key, val)
	}
	return b, n
}

func envKey(dst, name []byte) []byte {
	dst = append(dst, "HTTP_"...)
	for _, c := range name {
		switch {
		case c == '-':
			c = '_'
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func seenBefore(prev []http1.Field, name []byte) bool {
	for i := range prev {
		if reqblock.EqualFold(prev[i].Name, name) {
			return true
		}
	}
	return false
}
