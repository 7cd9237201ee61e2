package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/pipeline"
)

// A Schedule's run that begins after its time was missed, whose pipeline's
// catch-up policy does not run it, is recorded as skipped (missed_catch_up)
// and allocates nothing; the same run on time, or started with a nominal
// time (starter run, a backfill), never asks the policy.
func TestScheduledRunCatchUp(t *testing.T) {
	scheduled := nominal()
	cases := []struct {
		name      string
		began     time.Time
		input     time.Time // the start's nominal time; zero: the Schedule's
		run       bool      // the policy's answer
		wantAsked bool
		want      allot.Outcome
	}{
		{"missed, policy skips", scheduled.Add(time.Hour), time.Time{}, false, true, allot.OutcomeSkipped},
		{"missed, policy runs", scheduled.Add(time.Hour), time.Time{}, true, true, allot.OutcomeAllocated},
		{"on time", scheduled.Add(pipeline.MinCatchUpGrace), time.Time{}, false, false, allot.OutcomeAllocated},
		{"manual run of an old time", scheduled.Add(time.Hour), scheduled, false, false, allot.OutcomeAllocated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(ScheduledRun)
			env.RegisterWorkflow(Episode)
			env.RegisterActivity(a)
			env.SetStartTime(c.began)
			key := allot.AllocationKey("weekly-video", scheduled)
			env.SetStartWorkflowOptions(startOptions(key))
			if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(ScheduledStartTimeAttr.ValueSet(scheduled))); err != nil {
				t.Fatal(err)
			}
			var asked []activities.DecideCatchUpInput
			env.OnActivity(a.DecideCatchUp, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.DecideCatchUpInput) (activities.DecideCatchUpResult, error) {
					asked = append(asked, in)
					return activities.DecideCatchUpResult{CatchUpDecision: pipeline.CatchUpDecision{Missed: true, Run: c.run}, Policy: "skip"}, nil
				}).Maybe()
			allocated := 0
			env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.AllocateInput) (activities.AllocateResult, error) {
					allocated++
					return activities.AllocateResult{Decision: allot.OutcomeSkipped, Reason: allot.ReasonCapReached, Period: "2026-W32", Sequence: -1}, nil
				}).Maybe()
			outcomes := recordedOutcomes(env)
			env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: c.input})
			var res ScheduledRunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if (len(asked) > 0) != c.wantAsked {
				t.Fatalf("policy asked %d times, want asked=%v", len(asked), c.wantAsked)
			}
			if c.wantAsked && (!asked[0].NominalTime.Equal(scheduled) || !asked[0].BeganAt.Equal(c.began) || asked[0].Key != key || asked[0].RunID == "") {
				t.Fatalf("policy asked with %+v, want nominal %s began %s, key %s and the run's ID", asked[0], scheduled, c.began, key)
			}
			if len(*outcomes) != 1 {
				t.Fatalf("recorded %d outcomes, want 1", len(*outcomes))
			}
			got := (*outcomes)[0]
			if c.want == allot.OutcomeSkipped {
				if allocated != 0 || got.Outcome != allot.OutcomeSkipped || got.Reason != allot.ReasonMissedCatchUp || got.EpisodeID != "" || !got.NominalTime.Equal(scheduled) || got.Key != key {
					t.Fatalf("allocated %d times, recorded %+v; want a skipped missed_catch_up run under %s and no allocation", allocated, got, key)
				}
				if res.Outcome != allot.OutcomeSkipped || res.Reason != allot.ReasonMissedCatchUp {
					t.Fatalf("result %+v", res)
				}
				return
			}
			if allocated != 1 || got.Reason == allot.ReasonMissedCatchUp {
				t.Fatalf("allocated %d times, recorded %+v; want one allocation", allocated, got)
			}
		})
	}
}
