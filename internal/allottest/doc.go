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
	"allot"
)

// ErrorType is the type of the typed error in err's chain
// ("EpisodeNotFound", ...): an allot.Error's, or a Temporal application
// error's; "" if there is none (allot.ErrorType).
func ErrorType(err error) string { return allot.ErrorType(err) }
