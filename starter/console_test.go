package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The operator page has no operator tokens yet: a non-loopback --addr is a
// usage error, found before the ledger is opened or Temporal dialled (the
// ledger here does not exist, which would fail with exit 1).
func TestConsoleRefusesANonLoopbackAddr(t *testing.T) {
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "192.0.2.1:8090"} {
		code, _, stderr := run(t, "console", "--ledger", missing, "--addr", addr)
		if code != exitUsage || !strings.Contains(stderr, "--addr") || !strings.Contains(stderr, "not a loopback address") || !strings.Contains(stderr, "starter console --addr 127.0.0.1:8090") {
			t.Errorf("console --addr %s = exit %d\n%s\nwant exit %d naming --addr, that it is not loopback, and the command", addr, code, stderr, exitUsage)
		}
	}
	code, _, stderr := run(t, "console", "--ledger", missing, "--web-ui", "http://user:secret@ui.example")
	if code != exitUsage || !strings.Contains(stderr, "--web-ui") || strings.Contains(stderr, "secret") {
		t.Errorf("console --web-ui with a password = exit %d\n%s", code, stderr)
	}
}
