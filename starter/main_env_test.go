package main

import (
	"os"
	"testing"

	"allot/internal/cleanenv"
)

// The tests run code that reads ALLOT_* and TEMPORAL_* in-process
// (ConfigFromEnv, TemporalOptions, the vendor's key): none of the caller's
// shell reaches it, each test sets what it needs.
func TestMain(m *testing.M) { os.Exit(cleanenv.Run(m)) }

// With an operator's shell exported (.ci/leak-probe.env), commands run
// in-process by the tests still pass: TestMain cleared it.
func TestInProcessTestsIgnoreTheCallersShell(t *testing.T) {
	cleanenv.RunWithProbe(t, "TestVendorPauseResumeList", "TestJSONErrorObjectForEveryFailure", "TestDocsStarterCommandsParse")
}
