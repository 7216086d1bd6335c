package proxy

import (
	"strings"
	"testing"
)

// Every bad entry of a list is reported, not only the first.
func TestParseAllowListAllBad(t *testing.T) {
	_, err := ParseAllowList("10.0.0.0/8,garbage, 1.2.3.999,::1,fe80::1%eth0")
	if err == nil {
		t.Fatal("no error")
	}
	for _, bad := range []string{`"garbage"`, `"1.2.3.999"`, `"fe80::1%eth0"`} {
		if !strings.Contains(err.Error(), bad) {
			t.Errorf("error lacks %s: %v", bad, err)
		}
	}
	if strings.Contains(err.Error(), "10.0.0.0/8") || strings.Contains(err.Error(), `"::1"`) {
		t.Errorf("error names a good entry: %v", err)
	}
}
