// Package patience bounds a test's waits: a bound written for an idle
// machine, stretched by ALLOT_TEST_PATIENCE and capped by the test
// binary's deadline. It imports nothing of allot's, so that any package's
// internal tests can use it (package allottest, which links the dev stack,
// re-exports it for the integration tests).
package patience

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// Bounds on waiting. An integration test waits for events (a workflow
// reaching a stage, a row in the ledger, a line in a log) and fails if one
// never comes. How long "never" is must not depend on how busy the machine
// is: on a loaded CI runner (other builds, fuzzing, a chaos run) every step
// takes longer, and a test that fails there for want of patience was
// asserting a timing. So a bound written for an idle machine is stretched
// by Patience, and capped by the test binary's own deadline (go test
// -timeout), so that a wait that truly never ends still fails with its own
// message rather than the binary's timeout panic.

// DefaultPatience is how many times an idle machine's bound a wait lasts.
// The bounds are already several times what an idle machine needs (a wait
// of 2 minutes for what takes 20 seconds), and a load average of 15 on 2
// cores made the examples' tests 9x slower than alone: 4 more covers it.
const DefaultPatience = 4

// PatienceEnv overrides DefaultPatience (a whole number, 1 or more).
const PatienceEnv = "ALLOT_TEST_PATIENCE"

// Patience is the factor every bound on waiting is stretched by.
func Patience() time.Duration {
	if n, err := strconv.Atoi(os.Getenv(PatienceEnv)); err == nil && n >= 1 {
		return time.Duration(n)
	}
	return DefaultPatience
}

// deadlineMargin is what a wait leaves before the test binary's deadline,
// for the failure to be reported and everything torn down.
const deadlineMargin = time.Minute

// Within is how long to wait for something that takes at most d on an idle
// machine: d times Patience, but never past the test binary's deadline.
func Within(t testing.TB, d time.Duration) time.Duration {
	wait := d * Patience()
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, set := dl.Deadline(); set {
			if left := time.Until(end) - deadlineMargin; left < wait {
				wait = max(left, d)
			}
		}
	}
	return wait
}

// Deadline is the time a wait for something that takes at most d on an idle
// machine gives up (see Within).
func Deadline(t testing.TB, d time.Duration) time.Time { return time.Now().Add(Within(t, d)) }

// Context is a context that ends when a wait for something that takes at
// most d on an idle machine gives up (see Within).
func Context(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Within(t, d))
}
