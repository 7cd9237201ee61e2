package allottest

import (
	"context"
	"testing"
	"time"

	"allot/internal/patience"
)

// Bounds on waiting: see package patience, which these re-export for the
// integration tests.

// DefaultPatience is patience.DefaultPatience.
const DefaultPatience = patience.DefaultPatience

// PatienceEnv is patience.PatienceEnv.
const PatienceEnv = patience.PatienceEnv

// Patience is patience.Patience.
func Patience() time.Duration { return patience.Patience() }

// Within is patience.Within.
func Within(t testing.TB, d time.Duration) time.Duration { return patience.Within(t, d) }

// Deadline is patience.Deadline.
func Deadline(t testing.TB, d time.Duration) time.Time { return patience.Deadline(t, d) }

// Context is patience.Context.
func Context(t testing.TB, d time.Duration) (context.Context, context.CancelFunc) {
	return patience.Context(t, d)
}
