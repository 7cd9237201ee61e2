// Package allottest holds what allot's integration tests share, so that each
// exists once: a real Temporal server in-process with an allot worker, a
// ledger and a simulated paid vendor on it (Cluster); the vendor with
// counters (Vendor); the test pipelines (testdata/pipelines.toml); the
// one-command dev stack (StartDev, RunDemoEpisode); processes of the real
// binaries (BuildBinary, StartProcess); and a goroutine-safe buffer for
// logs (SyncBuffer).
//
// Every helper takes the test's *testing.T, marks itself with t.Helper, fails
// the test itself on error, and tears down what it started with t.Cleanup.
//
// It links the Temporal server, so only tests that need one import it: the
// unit tests of production packages stay fast and light.
package allottest

import (
	"errors"

	"go.temporal.io/sdk/temporal"
)

// ErrorType is the type of the Temporal application error in err's chain
// ("EpisodeNotFound", ...), or "" if there is none.
func ErrorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
