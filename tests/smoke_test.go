package tests

import "testing"

func TestSmoke_Hello(t *testing.T) {
	s := Start(t, "hello:app")
	code, body := s.Get(t, "/")
	if code != 200 || body != "Hello, World!\n" {
		t.Fatalf("GET / = %d %q; want 200 %q", code, body, "Hello, World!\n")
	}
}
