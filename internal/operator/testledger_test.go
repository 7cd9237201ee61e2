package operator

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
)

// testLedger is a SQLite ledger in the test's temporary directory (the
// same fixture as report's tests).
type testLedger struct {
	t    *testing.T
	path string
	led  *ledger.Ledger
}

func newTestLedger(t *testing.T) *testLedger {
	t.Helper()
	path := filepath.Join(t.TempDir(), "allot.db")
	led, err := ledger.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return &testLedger{t: t, path: path, led: led}
}

// allocate binds the key a Schedule forms for nominal to an episode of the
// pipeline's ISO week, as ScheduledRun does.
func (l *testLedger) allocate(pipelineName string, nominal time.Time) ledger.Episode {
	l.t.Helper()
	y, w := nominal.ISOWeek()
	res, err := l.led.Allocate(context.Background(), ledger.AllocateInput{
		Pipeline: pipelineName, Key: allot.AllocationKey(pipelineName, nominal),
		Period: fmt.Sprintf("%04d-W%02d", y, w), NominalTime: nominal,
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return res.Episode
}

var (
	mon     = time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)  // 2026-W32
	nextMon = time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC) // 2026-W33
)
