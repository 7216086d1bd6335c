//go:build ignore

// smuggling-corpus-gen writes smuggling-corpus.txt: public HTTP request
// smuggling corpora rewritten as data, one request per line, with the
// outcome a strict RFC 9112 origin server must give. Run from the
// repository root:
//
//	go run internal/http1/testdata/smuggling-corpus-gen.go > internal/http1/testdata/smuggling-corpus.txt
//
// Sources (read at the commits named, rewritten here, no code copied):
//
//   - defparam/smuggler (MIT), configs/default.py @43c8386b1c1bc7c8ee876b228dbac6b007e8d943,
//     configs/exhaustive.py @05dedc1c98f8b1aa42e61c5dc1f24f55156631c0,
//     configs/doubles.py @43c8386b1c1bc7c8ee876b228dbac6b007e8d943: the
//     Transfer-Encoding mutations ("gadgets"); smuggler.py's two probes
//     (_check_tecl, _check_clte) give the two body shapes below.
//   - PortSwigger/http-request-smuggler (Apache-2.0),
//     src/burp/DesyncBox.java @1a9af54142f2f22a298f16cdacffe0249a0f0e68
//     (applyDesync: the HTTP/1 permutations, applied to Transfer-Encoding
//     and, as the extension does for its CL scans, to Content-Length), and
//     src/burp/ChunkSizeScan.java @93825418fac9ea16d5c0e6a89d5c17dedae7e434
//     (the "funky chunks" TERM.EXT, EXT.TERM, TERM.SPILL, SPILL.TERM,
//     ONE.TWO, TWO.ONE, ZERO.TWO, TWO.ZERO bodies, forward and inverted).
//
// The expected outcomes are written out below by hand (accepted sets with
// their reasons), not computed by the parser under test.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

type entry struct {
	name, expect string
	status       int
	raw          string
}

var (
	entries []entry
	names   = map[string]bool{}
	gadgets = map[string]bool{} // "TE:"/"CL:" + gadget bytes: a gadget two sources share is sent once
)

func add(name, expect string, status int, raw string) {
	if names[name] {
		panic("duplicate name " + name)
	}
	names[name] = true
	entries = append(entries, entry{name, expect, status, raw})
}

// fresh reports whether gadget (of kind "TE" or "CL") is new.
func fresh(kind, gadget string) bool {
	if gadgets[kind+":"+gadget] {
		return false
	}
	gadgets[kind+":"+gadget] = true
	return true
}

func hidden(name string) string {
	return "GET /smuggled/" + name + " HTTP/1.1\r\nHost: a\r\n\r\n"
}

// teRequest renders a Transfer-Encoding gadget the way smuggler's
// configs render it (gadget first, then Host and Content-Length; the
// User-Agent and Content-type lines are left out) with one of the two
// probe bodies, a hidden request standing in for smuggler's "X"/"Z":
//
//	tecl (smuggler _check_tecl): Content-Length covers the whole body,
//	     "0\r\n\r\n" + hidden. A server that frames by Transfer-Encoding
//	     would serve the hidden request.
//	clte (smuggler _check_clte): Content-Length covers only the chunk-size
//	     line of one chunk that holds the hidden request. A server that
//	     frames by Content-Length would serve the hidden request.
func teRequest(name, gadget, shape string) string {
	h := hidden(name)
	var body string
	var cl int
	switch shape {
	case "tecl":
		body = "0\r\n\r\n" + h
		cl = len(body)
	case "clte":
		size := fmt.Sprintf("%x\r\n", len(h))
		body = size + h + "\r\n0\r\n\r\n"
		cl = len(size)
	}
	return "POST /c/" + name + " HTTP/1.1\r\n" + gadget + "\r\nHost: a\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", cl) + body
}

// addTE adds a Transfer-Encoding gadget. Every gadget is sent with a
// Content-Length, so a server that reads any Transfer-Encoding in it must
// answer 400 and close (RFC 9112 §6.3 item 3; §6.1; §5). accepted gadgets
// (see acceptTE) carry no Transfer-Encoding field for a strict parser:
// Content-Length is then the only framing and only the tecl shape is
// sent (the clte shape would be two pipelined requests by the RFC).
// onlyTECL sends one shape for the byte sweeps of exhaustive.py and
// doubles.py: a server decides on the head alone, and both shapes of
// every named gadget and of default.py's sweep are sent.
func addTE(name, gadget string) { addTEShapes(name, gadget, false) }

func addTEShapes(name, gadget string, onlyTECL bool) {
	if !fresh("TE", gadget) {
		return
	}
	if why := acceptTE[name]; why != "" {
		add(name+".tecl", "accept", 200, teRequest(name+".tecl", gadget, "tecl"))
		return
	}
	add(name+".tecl", "reject", 400, teRequest(name+".tecl", gadget, "tecl"))
	if !onlyTECL {
		add(name+".clte", "reject", 400, teRequest(name+".clte", gadget, "clte"))
	}
}

// acceptTE: the gadgets in which a strict RFC 9112 parser sees no
// Transfer-Encoding field at all, with the reason.
var acceptTE = map[string]string{
	"smuggler.contentEnc": "Content-Encoding is not framing (RFC 9110 §8.4)",
	"hrs.contentEnc":      "Content-Encoding is not framing (RFC 9110 §8.4)",
	"hrs.encode":          "Transfer-%45ncoding is another token; nothing percent-decodes field names",
	// X: X<c>Transfer-Encoding: chunked is one field X whose value holds
	// HTAB, SP or obs-text (RFC 9110 §5.5): legal, and not framing.
	"smuggler.xprespace-09": "field X, HTAB in its value",
	"smuggler.xprespace-20": "field X, SP in its value",
	"smuggler.xprespace-a0": "field X, obs-text in its value",
	"smuggler.xprespace-ff": "field X, obs-text in its value",
}

// clRequest renders a Content-Length permutation: the body is the
// hidden request, Content-Length its length. A server that does not read
// the (mutated) Content-Length would take the body for the next request
// (a CL.0 desync).
func clRequest(name, gadget string) string {
	return "POST /c/" + name + " HTTP/1.1\r\nHost: a\r\n" + gadget + "\r\n\r\n" + hidden(name)
}

// acceptCL: the Content-Length permutations that are still one valid
// Content-Length field (OWS is SP / HTAB and may be absent, RFC 9110 §5.6.3;
// names are case-insensitive, §5.1).
var acceptCL = map[string]string{
	"hrs-cl.vanilla":      "plain",
	"hrs-cl.nospace1":     "no OWS",
	"hrs-cl.valueprefix1": "two SP of OWS",
	"hrs-cl.multiCase":    "case-insensitive name",
	"hrs-cl.UPPERCASE":    "case-insensitive name",
	"hrs-cl.connection":   "Connection: Content-Length is an option for intermediaries; the field itself is valid",
	"hrs-cl.spacefix1-09": "HTAB as OWS",
	"hrs-cl.prefix1-09":   "SP HTAB as OWS",
}

func addCL(name, gadget string) {
	if !fresh("CL", gadget) {
		return
	}
	if acceptCL[name] != "" {
		add(name, "accept", 200, clRequest(name, gadget))
	} else {
		add(name, "reject", 400, clRequest(name, gadget))
	}
}

// hrsPermute applies DesyncBox.applyDesync's HTTP/1 techniques to the
// field "<header>: <value>" and returns the replacement line(s).
func hrsPermute(header, value, technique string) (string, bool) {
	h := header + ": "
	var p string
	switch technique {
	case "vanilla":
		p = h
	case "underjoin1":
		p = strings.ReplaceAll(h, "-", "_")
	case "spacejoin1":
		p = strings.ReplaceAll(h, "-", " ")
	case "space1":
		p = strings.ReplaceAll(h, ":", " :")
	case "nameprefix1":
		p = "Foo: bar\r\n " + h
	case "nameprefix2":
		p = "Foo: bar\r\n\t" + h
	case "valueprefix1":
		p = h + " "
	case "nospace1":
		p = strings.ReplaceAll(h, " ", "")
	case "linewrapped1":
		p = strings.ReplaceAll(h, " ", "\n ")
	case "gareth1":
		p = strings.ReplaceAll(h, ":", "\n :")
	case "badsetupCR":
		p = "Foo: bar\r" + h
	case "badsetupLF":
		p = "Foo: bar\n" + h
	case "vertwrap":
		p = h + "\n\x0b"
	case "tabwrap":
		p = h + "\r\n\t"
	case "multiCase":
		u := strings.ToUpper(h)
		p = strings.ToLower(u[:1]) + u[1:]
	case "UPPERCASE":
		p = strings.ToUpper(h)
	case "0dwrap":
		p = "Foo: bar\r\n\r" + h
	case "0dspam":
		p = h[:3] + "\r" + h[3:]
	case "connection":
		p = "Connection: " + header + "\r\n" + h
	case "spjunk":
		p = strings.ReplaceAll(h, ":", " x:")
	case "backslash":
		p = strings.ReplaceAll(h, "-", "\\")
	case "spaceFF":
		p = h[:len(h)-1] + "\xff"
	case "unispace":
		p = h[:len(h)-1] + "\xa0"
	default:
		for _, c := range hrsSpecial {
			switch technique {
			case fmt.Sprintf("spacefix1-%02x", c):
				return strings.ReplaceAll(h, " ", "") + string([]byte{c}) + value, true
			case fmt.Sprintf("prefix1-%02x", c):
				return h + string([]byte{c}) + value, true
			}
		}
		return "", false
	}
	return p + value, true
}

// hrsSpecial is DesyncBox.getSpecialChars.
var hrsSpecial = []byte{0, 9, 11, 12, 13, 127}

var hrsShared = []string{"vanilla", "underjoin1", "spacejoin1", "space1", "nameprefix1", "nameprefix2",
	"valueprefix1", "vertwrap", "connection", "spjunk", "backslash", "spaceFF", "unispace"}
var hrsH1 = []string{"nospace1", "linewrapped1", "gareth1", "badsetupCR", "badsetupLF", "multiCase",
	"tabwrap", "UPPERCASE", "0dwrap", "0dspam"}

// hrsTE are DesyncBox's Transfer-Encoding-only techniques, as the field
// line (or lines) that replaces "Transfer-Encoding: chunked".
var hrsTE = [][2]string{
	{"commaCow", "Transfer-Encoding: chunked, identity"},
	{"cowComma", "Transfer-Encoding: identity, chunked"},
	{"contentEnc", "Content-Encoding: chunked"},
	{"quoted", "Transfer-Encoding: \"chunked\""},
	{"aposed", "Transfer-Encoding: 'chunked'"},
	// addOrReplaceHeader("Transfer-encoding", "identity") matches names
	// case-sensitively, so it adds a second field.
	{"dualchunk", "Transfer-Encoding: chunked\r\nTransfer-encoding: identity"},
	{"lazygrep", "Transfer-Encoding: chunk"},
	{"0dsuffix", "Transfer-Encoding: chunked\r"},
	{"tabsuffix", "Transfer-Encoding: chunked\t"},
	{"revdualchunk", "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked"},
	{"nested", "Transfer-Encoding: identity, chunked, identity"},
	{"encode", "Transfer-%45ncoding: chunked"},
	{"accentTE", "Transf\x82r-Encoding: chunked"},
	{"accentCH", "Transfer-Encoding: ch\x96nked"},
	{"bodysplit", "X: y\r\nFoo: barn\n\nTransfer-Encoding: chunked"},
}

func main() {
	// --- defparam/smuggler configs/default.py -------------------------
	for _, g := range [][2]string{
		{"nameprefix1", " Transfer-Encoding: chunked"},
		{"tabprefix1", "Transfer-Encoding:\tchunked"},
		{"tabprefix2", "Transfer-Encoding\t:\tchunked"},
		{"space1", "Transfer-Encoding : chunked"},
	} {
		addTE("smuggler."+g[0], g[1])
	}
	for _, c := range []byte{0x1, 0x4, 0x8, 0x9, 0xa, 0xb, 0xc, 0xd, 0x1f, 0x20, 0x7f, 0xa0, 0xff} {
		s := string([]byte{c})
		for _, f := range [][2]string{
			{"midspace", "Transfer-Encoding:" + s + "chunked"},
			{"postspace", "Transfer-Encoding" + s + ": chunked"},
			{"prespace", s + "Transfer-Encoding: chunked"},
			{"endspace", "Transfer-Encoding: chunked" + s},
			{"xprespace", "X: X" + s + "Transfer-Encoding: chunked"},
			{"endspacex", "Transfer-Encoding: chunked" + s + "X: X"},
			{"rxprespace", "X: X\r" + s + "Transfer-Encoding: chunked"},
			{"xnprespace", "X: X" + s + "\nTransfer-Encoding: chunked"},
			{"endspacerx", "Transfer-Encoding: chunked\r" + s + "X: X"},
			{"endspacexn", "Transfer-Encoding: chunked" + s + "\nX: X"},
		} {
			addTE(fmt.Sprintf("smuggler.%s-%02x", f[0], c), f[1])
		}
	}

	// --- defparam/smuggler configs/exhaustive.py -----------------------
	for _, g := range [][2]string{
		{"spacejoin1", "Transfer Encoding: chunked"},
		{"underjoin1", "Transfer_Encoding: chunked"},
		{"smashed", "Transfer Encoding:chunked"},
		{"valueprefix1", "Transfer-Encoding:  chunked"},
		{"vertprefix1", "Transfer-Encoding:\x0bchunked"},
		{"commaCow", "Transfer-Encoding: chunked, cow"},
		{"cowComma", "Transfer-Encoding: cow, chunked"},
		{"contentEnc", "Content-Encoding: chunked"},
		{"linewrapped1", "Transfer-Encoding:\n chunked"},
		{"quoted", "Transfer-Encoding: \"chunked\""},
		{"aposed", "Transfer-Encoding: 'chunked'"},
		{"lazygrep", "Transfer-Encoding: chunk"},
		{"sarcasm", "TrAnSFer-EnCODinG: cHuNkeD"},
		{"yelling", "TRANSFER-ENCODING: CHUNKED"},
		{"0dsuffix", "Transfer-Encoding: chunked\r"},
		{"tabsuffix", "Transfer-Encoding: chunked\t"},
		{"revdualchunk", "Transfer-Encoding: cow\r\nTransfer-Encoding: chunked"},
		{"0dspam", "Transfer\r-Encoding: chunked"},
		{"nested", "Transfer-Encoding: cow chunked bar"},
		{"spaceFF", "Transfer-Encoding:\xffchunked"},
		{"accentCH", "Transfer-Encoding: ch\x96nked"},
		{"accentTE", "Transf\x82r-Encoding: chunked"},
		{"x-rout", "X:X\rTransfer-Encoding: chunked"},
		{"x-nout", "X:X\nTransfer-Encoding: chunked"},
	} {
		addTE("smuggler."+g[0], g[1])
	}
	var loop []byte
	for c := 0x01; c < 0x20; c++ {
		loop = append(loop, byte(c))
	}
	for c := 0x7f; c < 0x100; c++ {
		loop = append(loop, byte(c))
	}
	for _, c := range loop {
		s := string([]byte{c})
		for _, f := range [][2]string{
			{"midspace", "Transfer-Encoding:" + s + "chunked"},
			{"postspace", "Transfer-Encoding" + s + ": chunked"},
			{"prespace", s + "Transfer-Encoding: chunked"},
			{"endspace", "Transfer-Encoding: chunked" + s},
		} {
			addTEShapes(fmt.Sprintf("smuggler.%s-%02x", f[0], c), f[1], true) // skipped if also in default.py
		}
	}

	// --- defparam/smuggler configs/doubles.py, for the bytes of
	// DesyncBox.getSpecialChars plus SP, NBSP and 0xFF (the whole file is
	// 0x01-0x20 and 0x7f-0xff; the other bytes behave as these do) --------
	for _, c := range []byte{0x9, 0xb, 0xc, 0xd, 0x20, 0x7f, 0xa0, 0xff} {
		s := string([]byte{c})
		for _, f := range [][2]string{
			{"%02x-%02x-XX-XX", s + "Transfer-Encoding" + s + ": chunked"},
			{"%02x-XX-%02x-XX", s + "Transfer-Encoding:" + s + "chunked"},
			{"%02x-XX-XX-%02x", s + "Transfer-Encoding: chunked" + s},
			{"XX-%02x-%02x-XX", "Transfer-Encoding" + s + ":" + s + "chunked"},
			{"XX-%02x-XX-%02x", "Transfer-Encoding" + s + ": chunked" + s},
			{"XX-XX-%02x-%02x", "Transfer-Encoding:" + s + "chunked" + s},
		} {
			addTEShapes("smuggler.doubles."+fmt.Sprintf(f[0], c, c), f[1], true)
		}
	}

	// --- PortSwigger http-request-smuggler DesyncBox, Transfer-Encoding ----
	techniques := append(append([]string{}, hrsShared...), hrsH1...)
	for _, c := range hrsSpecial {
		techniques = append(techniques, fmt.Sprintf("spacefix1-%02x", c), fmt.Sprintf("prefix1-%02x", c))
	}
	for _, tech := range techniques {
		line, ok := hrsPermute("Transfer-Encoding", "chunked", tech)
		if !ok {
			panic(tech)
		}
		addTE("hrs."+tech, line)
	}
	for _, g := range hrsTE {
		addTE("hrs."+g[0], g[1])
	}
	for _, c := range hrsSpecial {
		addTE(fmt.Sprintf("hrs.suffix1-%02x", c), "Transfer-Encoding: chunked"+string([]byte{c}))
	}
	// badwrap: the field moves to a line folded under the request-line.
	add("hrs.badwrap.tecl", "reject", 400, strings.Replace(
		teRequest("hrs.badwrap.tecl", "X-Blah-Ignore: chunked", "tecl"), "\r\n", "\r\n Transfer-Encoding: chunked\r\n", 1))
	add("hrs.badwrap.clte", "reject", 400, strings.Replace(
		teRequest("hrs.badwrap.clte", "X-Blah-Ignore: chunked", "clte"), "\r\n", "\r\n Transfer-Encoding: chunked\r\n", 1))

	// --- PortSwigger DesyncBox, the shared and HTTP/1 techniques applied to
	// Content-Length ------------------------------------------------------
	for _, tech := range techniques {
		name := "hrs-cl." + tech
		line, ok := hrsPermute("Content-Length", fmt.Sprint(len(hidden(name))), tech)
		if !ok {
			panic(tech)
		}
		addCL(name, line)
	}
	add("hrs-cl.badwrap", "reject", 400, strings.Replace(
		clRequest("hrs-cl.badwrap", "X-Blah-Ignore: "+fmt.Sprint(len(hidden("hrs-cl.badwrap")))), "\r\n",
		"\r\n Content-Length: "+fmt.Sprint(len(hidden("hrs-cl.badwrap")))+"\r\n", 1))

	// --- PortSwigger ChunkSizeScan ("funky chunks"): the head is valid, the
	// chunked body is not: 400 when the body is read, then close ---------
	funky := func(name, body string) {
		add("funky."+name, "reject-body", 400,
			"POST /c/funky."+name+" HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+body)
	}
	term := func(t string) string {
		return strings.NewReplacer("\n", "lf", "\r", "cr").Replace(t)
	}
	for _, t := range []string{"\n", "\r", "\rX", "\r\r"} {
		funky("term-ext-"+term(t), "2;"+t+"XX\r\n10\r\n1f\r\nAAAABBBBCCCC\r\n0\r\n\r\nDDDDEEEEFFFF\r\n0\r\n\r\n")
		funky("term-ext-"+term(t)+"-inv", "2;"+t+"XX\r\n14\r\n10\r\nAAAABBBBCCCCDDDD\r\n0\r\n\r\n")
		funky("ext-term-"+term(t), "2;"+t+"XX\r\n22\r\nc\r\nAAAABBBBCCCC\r\n0\r\n\r\nDDDDEEEEFFFF\r\n0\r\n\r\n")
		funky("ext-term-"+term(t)+"-inv", "2;"+t+"XX\r\n10\r\nd\r\nAAAABBBBCCCCD\r\n0\r\n\r\n")
	}
	for _, t := range []string{"\n", "\r", "", "XX", "\rX", "\r\r"} {
		n := term(t)
		if n == "" {
			n = "none"
		}
		funky("term-spill-"+n, "5\r\nAAAAA"+t+"c\r\n17\r\nAAAABBBB\r\n0\r\n\r\nCCCCDDDD\r\n0\r\n\r\n")
		funky("term-spill-"+n+"-inv", "5\r\nAAAAA"+t+"c\r\n9\r\nAAAABBBBC\r\n0\r\n\r\n")
		funky("spill-term-"+n, "5\r\nAAAAA"+t+"1a\r\n8\r\nAAAABBBB\r\n0\r\n\r\nCCCCDDDD\r\n0\r\n\r\n")
		funky("spill-term-"+n+"-inv", "5\r\nAAAAA"+t+"b\r\n8\r\nAAAABBBB\r\n0\r\n\r\n")
	}
	for _, t := range []string{"\n", "\r"} {
		funky("one-two-"+term(t), "2\r\nXX"+t+"12\r\nXX\r\n19\r\nXXAAAABBBB\r\n0\r\n\r\nCCCCDDDD\r\n0\r\n\r\n")
		funky("one-two-"+term(t)+"-inv", "2\r\nXX"+t+"12\r\nXX\r\nb\r\nXXXAAAABBBB\r\n0\r\n\r\n")
		funky("two-one-"+term(t), "2\r\nXX"+t+"10\r\n\r\nAAAABBBBCCCCDD\r\n0\r\n\r\n")
	}
	funky("zero-two", "2\r\nXX012\r\nXX\r\n19\r\nXXAAAABBBB\r\n0\r\n\r\nCCCCDDDD\r\n0\r\n\r\n")
	funky("two-zero", "2\r\nxx010\r\n\r\nAAAABBBBCCCCDD\r\n0\r\n\r\n")

	write()
}

// quote writes s as a Go (and Python) string literal with every byte
// outside printable ASCII escaped (\r, \n, \t or \xHH).
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func write() {
	counts := map[string]int{}
	for _, e := range entries {
		counts[e.expect]++
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := os.Stdout
	fmt.Fprint(w, `# HTTP request smuggling corpus for turnstile's strict HTTP/1.1 layer.
# Generated by smuggling-corpus-gen.go (same directory): edit that, not this.
#
# Rewritten as data from:
#   defparam/smuggler (MIT): configs/default.py and configs/doubles.py
#     @43c8386b1c1bc7c8ee876b228dbac6b007e8d943, configs/exhaustive.py
#     @05dedc1c98f8b1aa42e61c5dc1f24f55156631c0 (Transfer-Encoding
#     mutations, "smuggler.*"), with smuggler.py's two probe bodies;
#   PortSwigger/http-request-smuggler (Apache-2.0):
#     src/burp/DesyncBox.java @1a9af54142f2f22a298f16cdacffe0249a0f0e68
#     (applyDesync's HTTP/1 permutations on Transfer-Encoding, "hrs.*", and
#     on Content-Length, "hrs-cl.*") and src/burp/ChunkSizeScan.java
#     @93825418fac9ea16d5c0e6a89d5c17dedae7e434 (chunk-size/extension
#     "funky chunks" bodies, "funky.*").
#
# One request per line:  NAME  EXPECT  STATUS  "RAW"
#   RAW is a Go/Python string literal (\r \n \t \xHH escapes) of the exact
#   bytes sent on a fresh connection.
#   EXPECT:
#     reject       framing in doubt: exactly one response with STATUS and
#                  "Connection: close", then the server closes; the request
#                  never reaches the application.
#     reject-body  the head is valid, the chunked body is not: exactly one
#                  response with STATUS, then close (the application may
#                  have started the request; it meets the error reading
#                  the body).
#     accept       a valid request with unambiguous framing: exactly one
#                  response with STATUS; the connection stays usable (a
#                  follow-up request on it gets its own answer, so no
#                  leftover byte was taken for a request).
#   In every case no request below /smuggled/ may reach the application.
#
# Bodies: smuggler's probes with a hidden request for its "X"/"Z":
#   .tecl  Content-Length covers "0\r\n\r\n" + hidden request: a server
#          framing by Transfer-Encoding would serve the hidden request.
#   .clte  Content-Length covers only the size line of a chunk that holds
#          the hidden request: a server framing by Content-Length would.
#          (Sent for the named gadgets and default.py's byte sweep; the
#          byte sweeps of exhaustive.py and doubles.py send .tecl only.)
#   hrs-cl.*: the body is the hidden request and Content-Length (mutated)
#          its length: a server ignoring the mutated field would serve it.
# A gadget that two sources share (same bytes) is sent once, under the
# first name.
#
`)
	for _, k := range keys {
		fmt.Fprintf(w, "# %s: %d\n", k, counts[k])
	}
	fmt.Fprintln(w)
	for _, e := range entries {
		fmt.Fprintf(w, "%s %s %d %s\n", e.name, e.expect, e.status, quote(e.raw))
	}
}
