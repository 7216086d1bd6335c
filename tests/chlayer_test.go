package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// channelsRedisVersion is the channels_redis whose own tests/test_core.py
// the layer must pass (requirements/test.txt pins the same).
const channelsRedisVersion = "4.3.0"

// channelsRedisTests downloads channels_redis's sdist with the virtualenv's
// pip (pip download --no-binary :all: --no-deps) once per machine and
// returns a directory holding its tests/test_core.py, unmodified.
func channelsRedisTests(t *testing.T, venv string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "turnstile-channels-redis-"+channelsRedisVersion)
	tests := filepath.Join(dir, "tests")
	if _, err := os.Stat(filepath.Join(tests, "test_core.py")); err == nil {
		return tests
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "chr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	pip := filepath.Join(venv, "bin", "pip")
	out, err := exec.Command(pip, "download", "-q", "--disable-pip-version-check", "--no-binary", ":all:", "--no-deps",
		"channels_redis=="+channelsRedisVersion, "-d", tmp).CombinedOutput()
	if err != nil {
		t.Skipf("cannot download channels_redis %s's sdist: %v\n%s", channelsRedisVersion, err, out)
	}
	sdist := filepath.Join(tmp, "channels_redis-"+channelsRedisVersion+".tar.gz")
	if out, err := exec.Command("tar", "-xzf", sdist, "-C", tmp).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// Only test_core.py: the generic layer tests (the others are Sentinel
	// and pub/sub, Redis's own).
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tmp, "channels_redis-"+channelsRedisVersion, "tests", "test_core.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tests, "test_core.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return tests
}

// TestChannelLayer_ChannelsRedisConformance runs channels_redis's generic
// layer tests (tests/test_core.py of its sdist, unmodified) against
// turnstile.channels.ChannelLayer inside the server: testapps/chlayer's
// app runs pytest on a thread, its plugin puts the layer under
// RedisChannelLayer's name and skips the Redis-specific tests by name.
func TestChannelLayer_ChannelsRedisConformance(t *testing.T) {
	venv := os.Getenv("TURNSTILE_VENV")
	if venv == "" || exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import channels_redis, pytest_asyncio, async_timeout").Run() != nil {
		t.Skip("channels_redis, pytest-asyncio or async-timeout is not installed in the test virtualenv (requirements/test.txt)")
	}
	tests := channelsRedisTests(t, venv)
	s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "conformance:app")
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(s.URL + "/run?path=" + url.QueryEscape(tests))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		RC     int    `json:"rc"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	t.Logf("pytest inside turnstile:\n%s", r.Output)
	if r.RC != 0 {
		t.Fatalf("pytest exit %d", r.RC)
	}
	// Every skip is one of the plugin's named Redis-specific ones.
	for _, line := range strings.Split(r.Output, "\n") {
		if strings.HasPrefix(line, "SKIPPED") && !strings.Contains(line, "Redis-specific") {
			t.Errorf("a skip not named by the plugin: %s", line)
		}
	}
	if m := regexp.MustCompile(`(\d+) passed`).FindStringSubmatch(r.Output); m == nil {
		t.Errorf("no passed tests in the report")
	}
}
