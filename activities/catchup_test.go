package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/livespec"
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

// The policy counts the later times of the live Schedule, not of the file:
// an hourly file whose Schedule was updated to every 10 minutes has three
// later times missed 35 minutes late, so `latest` skips the run; without a
// Schedule the file's spec decides (and the result says so).
func TestDecideCatchUpCountsTheLiveSchedulesTimes(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name = "p"
  [pipeline.schedule]
  interval = "1h"
  catch_up = "latest"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC)
	in := DecideCatchUpInput{Pipeline: "p", NominalTime: nominal, BeganAt: nominal.Add(35 * time.Minute), StartedAt: nominal}
	schedule := func(desc *client.ScheduleDescription, err error) client.Client {
		h := mocks.NewScheduleHandle(t)
		h.On("Describe", mock.Anything).Return(desc, err)
		sc := mocks.NewScheduleClient(t)
		sc.On("GetHandle", mock.Anything, allot.ScheduleID("p")).Return(h)
		cl := mocks.NewClient(t)
		cl.On("ScheduleClient").Return(sc)
		return cl
	}
	live := &client.ScheduleDescription{Schedule: client.Schedule{Spec: &client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 10 * time.Minute}}}}}
	a := &Activities{Pipelines: set, Temporal: schedule(live, nil)}
	d, err := a.DecideCatchUp(context.Background(), in)
	if err != nil || d.Run || !d.Missed || d.LaterMissed != 1 || d.SpecFrom != livespec.FromSchedule {
		t.Fatalf("by the live Schedule: %+v, %v; want missed with a later time missed, skipped", d, err)
	}
	a = &Activities{Pipelines: set, Temporal: schedule(nil, serviceerror.NewNotFound("no schedule"))}
	d, err = a.DecideCatchUp(context.Background(), in)
	if err != nil || !d.Run || !d.Missed || d.LaterMissed != 0 || d.SpecFrom != livespec.FromPipelineFile {
		t.Fatalf("without a Schedule: %+v, %v; want the file's spec (no later time), run", d, err)
	}
}

// A run whose workflow task was lost after it allocated begins again later,
// when the policy says skip: the ledger shows its run ID holds the key's
// episode, so the answer stays run, and the episode is not left bound to
// the key with no workflow. Another run of the key, or a key nobody holds,
// is skipped as before.
func TestDecideCatchUpRunsATimeThisRunAllocatedAlready(t *testing.T) {
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
	led := ledgertest.New(t).Led
	a := &Activities{Pipelines: set, Ledger: led}
	ctx := context.Background()
	nominal := time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC)
	key := allot.AllocationKey("p", nominal)
	if _, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "p", Key: key, Period: "2026-11-02", NominalTime: nominal, RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	late := DecideCatchUpInput{Pipeline: "p", NominalTime: nominal, BeganAt: nominal.Add(2 * time.Hour), StartedAt: nominal, Key: key}
	for _, c := range []struct {
		runID, key string
		run        bool
	}{
		{"run-1", key, true},
		{"run-2", key, false},
		{"run-1", allot.AllocationKey("p", nominal.Add(time.Hour)), false},
		{"", key, false},
	} {
		in := late
		in.RunID, in.Key = c.runID, c.key
		d, err := a.DecideCatchUp(ctx, in)
		if err != nil || !d.Missed || d.Run != c.run || d.AllocatedAlready != c.run {
			t.Errorf("run %q of key %s, late: %+v, %v; want missed, run=%v", c.runID, c.key, d, err, c.run)
		}
	}
}
