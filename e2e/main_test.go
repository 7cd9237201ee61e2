// Package e2e holds allot's end-to-end tests: each starts the embedded
// Temporal server (internal/allottest) with real workers, the starter
// binary and the simulated vendor, and checks what a user sees. The unit
// tests of app/ stay beside its code.
package e2e

import (
	"os"
	"testing"

	"allot/internal/cleanenv"
)

// The tests start workers and starters, and run code that reads ALLOT_* and
// TEMPORAL_* in-process: none of the caller's shell reaches them.
func TestMain(m *testing.M) { os.Exit(cleanenv.Run(m)) }
