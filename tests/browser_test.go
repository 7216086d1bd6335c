package tests

// The browser check (issue 9): Debian's headless Chromium loads a Django
// page over HTTPS from turnstile, with the page's stylesheet collected by
// Django's collectstatic and served by --static. It asserts that the
// stylesheet applied (the computed style, and its colour in the
// screenshot) and that both the page and the stylesheet came over h2.

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns Debian's chromium binary; .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (apt-get install chromium; .ci/run does it)")
	}
	return p
}

var resultRE = regexp.MustCompile(`<pre id="result">([^<]*)</pre>`)

func TestBrowser_DjangoStaticOverHTTP2(t *testing.T) {
	browser := chromium(t)
	binPath(t)
	pki := newPKI(t)
	root := t.TempDir()
	djangoManage(t, []string{"TURNSTILE_TEST_STATIC_ROOT=" + root}, "collectstatic", "--noinput", "-v", "0")
	s := Start(t, append(pki.TLSArgs(), "--static", "/static="+root, djangoApp)...)
	url := "https://127.0.0.1" + s.Addr[strings.LastIndexByte(s.Addr, ':'):] + "/styled/"

	// Trust exactly the server's key, as a pinned SPKI (Chromium's switch
	// for this; it needs its own profile directory).
	spki, err := x509.MarshalPKIXPublicKey(&pki.serverKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	run := func(args ...string) string {
		t.Helper()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--user-data-dir=" + t.TempDir(),
			"--ignore-certificate-errors-spki-list=" + base64.StdEncoding.EncodeToString(sum[:]),
			"--virtual-time-budget=10000", "--window-size=800,600"}
		cmd := exec.Command(browser, append(append(base, args...), url)...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
			}
		case <-time.After(90 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("chromium %v did not finish in 90 s\n%s", args, errb.String())
		}
		return out.String()
	}

	dom := run("--dump-dom")
	m := resultRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no result in the page's DOM:\n%s\nserver log:\n%s", dom, s.Logs())
	}
	var res struct {
		Background   string `json:"background"`
		PageProtocol string `json:"page_protocol"`
		CSSProtocol  string `json:"css_protocol"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "&quot;", `"`)), &res); err != nil {
		t.Fatalf("result %q: %v", m[1], err)
	}
	t.Logf("browser saw: %+v", res)
	if res.Background != "rgb(12, 34, 56)" {
		t.Errorf("banner background = %q; want rgb(12, 34, 56) from the static stylesheet", res.Background)
	}
	if res.PageProtocol != "h2" || res.CSSProtocol != "h2" {
		t.Errorf("nextHopProtocol: page %q, stylesheet %q; want h2 for both", res.PageProtocol, res.CSSProtocol)
	}
	if !strings.Contains(dom, "turnstile over https") {
		t.Errorf("Django did not see the request as https (request.scheme):\n%s", dom)
	}

	// The screenshot: the banner's colour fills its box.
	shot := filepath.Join(os.TempDir(), "turnstile-browser-check.png")
	os.Remove(shot)
	run("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == 12 && g>>8 == 34 && bl>>8 == 56 {
				n++
			}
		}
	}
	t.Logf("screenshot %s (%dx%d): %d banner pixels", shot, b.Dx(), b.Dy(), n)
	if n < 50000 {
		t.Errorf("screenshot has %d pixels of the banner colour; want the 416x216 banner (~85000)", n)
	}
}

// The browser check over HTTP/3 (issue 25): Chromium forced onto QUIC for
// the origin loads the Django page and its static stylesheet over h3;
// the page says so (nextHopProtocol) and so does the access log.
func TestBrowser_DjangoStaticOverHTTP3(t *testing.T) {
	browser := chromium(t)
	binPath(t)
	pki := newPKI(t)
	root := t.TempDir()
	djangoManage(t, []string{"TURNSTILE_TEST_STATIC_ROOT=" + root}, "collectstatic", "--noinput", "-v", "0")
	s := Start(t, append(pki.TLSArgs(), "--http3", "--access-log", "--static", "/static="+root, djangoApp)...)
	hostPort := "127.0.0.1" + s.Addr[strings.LastIndexByte(s.Addr, ':'):]
	url := "https://" + hostPort + "/styled/"
	spki, err := x509.MarshalPKIXPublicKey(&pki.serverKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(),
		"--ignore-certificate-errors-spki-list=" + base64.StdEncoding.EncodeToString(sum[:]),
		"--enable-quic", "--origin-to-force-quic-on=" + hostPort,
		"--virtual-time-budget=10000", "--window-size=800,600", "--dump-dom", url}
	cmd := exec.Command(browser, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, errb.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("chromium did not finish in 90 s\n%s", errb.String())
	}
	dom := out.String()
	m := resultRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no result in the page's DOM:\n%s\n%s", dom, errb.String())
	}
	var res struct {
		Background   string `json:"background"`
		PageProtocol string `json:"page_protocol"`
		CSSProtocol  string `json:"css_protocol"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "&quot;", `"`)), &res); err != nil {
		t.Fatalf("result %q: %v", m[1], err)
	}
	t.Logf("browser saw: %+v", res)
	if res.Background != "rgb(12, 34, 56)" {
		t.Errorf("banner background = %q; want rgb(12, 34, 56) from the static stylesheet", res.Background)
	}
	if res.PageProtocol != "h3" || res.CSSProtocol != "h3" {
		t.Errorf("nextHopProtocol: page %q, stylesheet %q; want h3 for both", res.PageProtocol, res.CSSProtocol)
	}
	if !strings.Contains(s.Logs(), `"protocol":"HTTP/3.0"`) {
		t.Errorf("no access record says HTTP/3.0")
	}
}

// WebSockets over HTTP/2 from Chromium (issue 24): a page loaded over h2
// opens a wss WebSocket to its own origin; Chromium uses the h2
// connection when the server offers extended CONNECT (RFC 8441), and the
// app says which HTTP version its websocket scope had.
func TestBrowser_WebSocketOverHTTP2(t *testing.T) {
	browser := chromium(t)
	binPath(t)
	pki := newPKI(t)
	s := Start(t, append(pki.TLSArgs(), "--access-log", "ws_h2_page:app")...)
	url := "https://127.0.0.1" + s.Addr[strings.LastIndexByte(s.Addr, ':'):] + "/"
	spki, err := x509.MarshalPKIXPublicKey(&pki.serverKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(),
		"--ignore-certificate-errors-spki-list="+base64.StdEncoding.EncodeToString(sum[:]),
		"--virtual-time-budget=10000", "--dump-dom", url)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, errb.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("chromium did not finish in 90 s\n%s", errb.String())
	}
	m := resultRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no result in the page's DOM:\n%s\nserver log:\n%s", out.String(), s.Logs())
	}
	var res struct {
		Server struct {
			HTTPVersion string `json:"http_version"`
		}
		Echo, Error  string
		PageProtocol string `json:"page_protocol"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "&quot;", `"`)), &res); err != nil {
		t.Fatalf("result %q: %v", m[1], err)
	}
	t.Logf("browser saw: %+v", res)
	if res.PageProtocol != "h2" {
		t.Errorf("the page came over %q; want h2", res.PageProtocol)
	}
	if res.Server.HTTPVersion != "2" {
		t.Errorf("the app's websocket scope had http_version %q (echo %q, error %q); want 2", res.Server.HTTPVersion, res.Echo, res.Error)
	}
}
