package operator

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/pipeline"
)

// A run's key is resolved once, by Preview, and the forecast and the start
// both take that: an operator's key given unplaced (--key manual-7) is
// looked up as the ledger keeps it (weekly/manual-7); the forecast of a
// re-run of an existing key once missed it and counted a new episode's
// reservation (issue 26 §1). A key in the Schedule's form carries its
// nominal time, which the preview takes instead of the clock.
func TestPreviewLooksUpTheKeyTheRunUses(t *testing.T) {
	ctx := context.Background()
	set, err := pipeline.Parse([]byte(pipelinetest.Budgeted{Limit: 500}.TOML()), "budgeted")
	if err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + filepath.Join(t.TempDir(), "allot.db")
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: "weekly/manual-7", Period: "2026-W32", NominalTime: mon})
	if err != nil {
		t.Fatal(err)
	}
	ledgerID := led.ID()
	led.Close()
	reads := 0
	runs := &Runs{Pipelines: set, Now: func() time.Time { return mon }, ReadLedger: func(ctx context.Context, read func(*ledger.Ledger) error) error {
		reads++
		return ledger.View(ctx, url, read)
	}}

	for _, key := range []string{"manual-7", "weekly/manual-7"} {
		pv, err := runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: key, NominalTime: mon})
		if err != nil || pv.Key != "weekly/manual-7" || !pv.Existing || pv.EpisodeID != ep.Episode.ID || len(pv.Forecast) != 0 || pv.LedgerID != ledgerID {
			t.Errorf("--key %s: preview %+v, %v; want the key's episode %s, no forecast, ledger %s", key, pv, err, ep.Episode.ID, ledgerID)
		}
	}
	pv, err := runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: "manual-8", NominalTime: mon})
	if err != nil || pv.Existing || len(pv.Forecast) != 1 || pv.Forecast[0].Period != "2026-W32" || !pv.Forecast[0].FreeKnown {
		t.Fatalf("a new key: preview %+v, %v; want a forecast of video-weekly 2026-W32 against the ledger", pv, err)
	}
	// The Schedule's key for a time of week 33, without a nominal time:
	// week 33, not the week of the clock.
	pv, err = runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: "weekly/scheduled-2026-08-10T02:00:00Z"})
	if err != nil || !pv.Nominal.Equal(nextMon) || len(pv.Forecast) != 1 || pv.Forecast[0].Period != "2026-W33" {
		t.Fatalf("the Schedule's key for 2026-08-10: preview %+v, %v; want nominal %s, video-weekly 2026-W33", pv, err, nextMon)
	}
	// Bad input is refused before the ledger is opened.
	before := reads
	if _, err := runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: "other/manual-1"}); err == nil || reads != before {
		t.Fatalf("another pipeline's key: %v after %d reads of the ledger, want a refusal and none", err, reads-before)
	}

	// No ledger yet: the forecast takes the limit, and the worker will
	// create the ledger.
	runs.ReadLedger = func(ctx context.Context, read func(*ledger.Ledger) error) error {
		return ledger.View(ctx, "sqlite:"+filepath.Join(t.TempDir(), "none.db"), read)
	}
	pv, err = runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: "manual-7", NominalTime: mon})
	if err != nil || pv.Existing || len(pv.Forecast) != 1 || pv.Forecast[0].FreeKnown || pv.Forecast[0].Free != 500 || pv.LedgerID != "" {
		t.Fatalf("without a ledger: preview %+v, %v; want the limit's forecast", pv, err)
	}
	// A ledger that cannot be read is an error, not a forecast from the
	// limits that would look like consent.
	broken := errors.New("ledger unreachable")
	runs.ReadLedger = func(context.Context, func(*ledger.Ledger) error) error { return broken }
	if _, err := runs.Preview(ctx, RunInput{Pipeline: "weekly", Key: "manual-7", NominalTime: mon}); !errors.Is(err, broken) {
		t.Fatalf("an unreadable ledger: %v, want its error", err)
	}
}
