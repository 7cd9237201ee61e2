package activities

import (
	"context"
	"testing"
	"time"

	"allot/pipeline"
)

// A run the Schedule started after its catchup_window is a backfill
// through the Schedule (--via-schedule): it runs whatever the policy. The
// same time started on time and begun late is missed and skipped.
func TestDecideCatchUpRunsBackfillsThroughTheSchedule(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name = "p"
  [pipeline.schedule]
  interval       = "1h"
  catchup_window = "10m"
  catch_up       = "skip"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Pipelines: set}
	nominal := time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC)
	late := nominal.Add(2 * time.Hour)
	d, err := a.DecideCatchUp(context.Background(), DecideCatchUpInput{Pipeline: "p", NominalTime: nominal, BeganAt: late, StartedAt: late})
	if err != nil || !d.Run || !d.Backfill {
		t.Fatalf("a backfill through the Schedule: %+v, %v; want it run", d, err)
	}
	d, err = a.DecideCatchUp(context.Background(), DecideCatchUpInput{Pipeline: "p", NominalTime: nominal, BeganAt: late, StartedAt: nominal})
	if err != nil || d.Run || !d.Missed || d.Policy != "skip" {
		t.Fatalf("a run started on time and begun late: %+v, %v; want it missed and skipped", d, err)
	}
}
