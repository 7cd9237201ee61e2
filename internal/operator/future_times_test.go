package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

const futureSet = `
[[pipeline]]
name = "hourly"
period = "day"
  [pipeline.schedule]
  cron = "0 * * * *"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// Both backfill paths refuse a range that reaches past now before they
// look the Schedule up: nothing is asked of Temporal, nothing started
// (the Schedules has no client; a call to it would panic).
func TestBackfillRefusesTimesStillToCome(t *testing.T) {
	set, err := pipeline.Parse([]byte(futureSet), "future_times_test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	s := &Schedules{Pipelines: set, now: func() time.Time { return now }}
	in := BackfillInput{Pipeline: "hourly", From: now.Add(-24 * time.Hour), To: now.Add(time.Hour), Flags: []string{"--via-schedule"}}
	for name, backfill := range map[string]func(context.Context, BackfillInput) (BackfillResult, error){
		"via schedule": s.Backfill, "fast": s.BackfillDirect,
	} {
		_, err := backfill(context.Background(), in)
		if !errors.Is(err, ErrTimeNotYet) || !isType(err, allot.InvalidInput) ||
			!strings.Contains(err.Error(), "--to 2026-12-03T14:00:00Z is after now (2026-12-03T13:00:00Z)") ||
			!strings.Contains(err.Error(), allot.BackfillCommand("hourly", in.From, now, "--via-schedule")) {
			t.Errorf("%s: %v; want the future refused, with the command that ends at now", name, err)
		}
	}
	// A range ending at now is in the past: it gets as far as the
	// Schedule (here, no client).
	if err := CheckBackfillRange("hourly", in.From, now, now); err != nil {
		t.Fatalf("a range ending at now: %v", err)
	}
}
