package operator

import (
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/ledgertest"
)

// testLedger is ledgertest's SQLite ledger, with this package's helpers.
type testLedger struct {
	*ledgertest.Ledger
	t    *testing.T
	path string
	led  *ledger.Ledger
}

func newTestLedger(t *testing.T) *testLedger { return asTestLedger(ledgertest.New(t)) }

func asTestLedger(l *ledgertest.Ledger) *testLedger {
	return &testLedger{Ledger: l, t: l.T, path: l.Path, led: l.Led}
}

func budgetLedger(t *testing.T) (*testLedger, []ledger.Episode) {
	l, eps := ledgertest.BudgetLedger(t)
	return asTestLedger(l), eps
}

var (
	mon     = time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)  // 2026-W32
	nextMon = time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC) // 2026-W33
)
