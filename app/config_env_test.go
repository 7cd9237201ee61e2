package app

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"allot/paidvendor"
)

// KnownEnv is exactly what ConfigFromEnv reads, plus the names read
// elsewhere (the vendor's key, read by the paid activities; a step's exec
// id): the list cannot drift from the config.
func TestKnownEnvIsWhatConfigReads(t *testing.T) {
	var read []string
	configFrom(func(name string) string { read = append(read, name); return "" })
	for _, name := range read {
		if !slices.Contains(KnownEnv, name) {
			t.Errorf("ConfigFromEnv reads %s, which KnownEnv lacks: add it", name)
		}
	}
	elsewhere := []string{paidvendor.EnvVendorAPIKey, paidvendor.EnvVendorAPIKeyFile, "ALLOT_EXEC_ID", EnvConsoleTokenFile}
	for _, name := range KnownEnv {
		if !slices.Contains(read, name) && !slices.Contains(elsewhere, name) {
			t.Errorf("KnownEnv lists %s, which nothing reads: remove it", name)
		}
	}
}

// An unknown ALLOT_ variable is warned about, one line each, naming the
// closest known one; known ones and the tests' ALLOT_TEST_* are not.
func TestWarnUnknownEnvNamesTheClosest(t *testing.T) {
	var b bytes.Buffer
	WarnUnknownEnv(slog.New(slog.NewTextHandler(&b, nil)), []string{
		"ALLOT_VENDOR_RATEE=2", "ALLOT_VENDOR_RATE=2", "ALLOT_LEDGR=sqlite:x", "ALLOT_TEST_POSTGRES_DSN=x", "PATH=/bin", "ALLOT_PIPELINES=p.toml",
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "variable=ALLOT_VENDOR_RATEE closest=ALLOT_VENDOR_RATE") ||
		!strings.Contains(lines[1], "variable=ALLOT_LEDGR closest=ALLOT_LEDGER") || !strings.Contains(lines[0], "level=WARN") {
		t.Fatalf("warnings:\n%s", b.String())
	}
}
