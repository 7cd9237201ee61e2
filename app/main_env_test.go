package app

import (
	"os"
	"slices"
	"strings"
	"testing"

	"allot/internal/cleanenv"
)

// The tests run code that reads ALLOT_* and TEMPORAL_* in-process
// (ConfigFromEnv, TemporalOptions, the vendor's key): none of the caller's
// shell reaches it, each test sets what it needs.
func TestMain(m *testing.M) { os.Exit(cleanenv.Run(m)) }

// envconfig, in a test, sees no TEMPORAL_* variable and no profile file of
// the caller's: no key, no TLS, no headers.
func TestTemporalOptionsReadNothingOfTheCallersShell(t *testing.T) {
	opts, err := TemporalOptions("127.0.0.1:7233", "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials != nil || opts.ConnectionOptions.TLS != nil || opts.HeadersProvider != nil {
		t.Fatalf("TemporalOptions took the caller's credentials, TLS or headers: %+v", opts)
	}
}

// With an operator's shell exported (.ci/leak-probe.env), the tests that
// read the environment in-process still pass: TestMain cleared it.
func TestInProcessTestsIgnoreTheCallersShell(t *testing.T) {
	cleanenv.RunWithProbe(t, "TestConfigReadsDefaultVendorLimits", "TestTemporalOptionsReadNothingOfTheCallersShell")
}

// The probe sets every ALLOT_* variable allot's binaries read, so a test
// that leaks any of them fails in CI.
func TestLeakProbeSetsEveryKnownVariable(t *testing.T) {
	var names []string
	for _, kv := range cleanenv.Probe(t) {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	for _, name := range KnownEnv {
		if !slices.Contains(names, name) {
			t.Errorf("%s does not set %s, which allot reads: add it, pointing nowhere useful", cleanenv.ProbeFile, name)
		}
	}
}
