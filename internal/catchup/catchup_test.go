package catchup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

// A sweep until a time still to come is refused before the Schedule is
// looked up (the Sweeper has no client: a call would panic).
func TestSweepRefusesTimesStillToCome(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name = "hourly"
  [pipeline.schedule]
  cron = "0 * * * *"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "catchup_test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	sw := &Sweeper{Pipelines: set}
	_, err = sw.Sweep(context.Background(), SweepInput{Pipeline: "hourly", Until: now.Add(time.Hour), Now: now})
	if !errors.Is(err, ErrTimeNotYet) || !strings.Contains(err.Error(), "until 2026-12-03T14:00:00Z is after now") ||
		!strings.Contains(err.Error(), allot.CatchUpCommand("hourly", now)) {
		t.Fatalf("sweep until an hour from now: %v", err)
	}
}
