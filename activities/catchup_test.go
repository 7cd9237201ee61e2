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
