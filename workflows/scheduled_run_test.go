package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

var a *activities.Activities

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ScheduledRun)
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(a)
	// Outcome records are asserted where they matter; elsewhere they may happen.
	env.OnActivity(a.RecordEpisodeOutcome, mock.Anything, mock.Anything).Return(nil).Maybe()
	return env
}

func nominal() time.Time { return time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC) }

// recordedOutcomes captures every RecordRunOutcome call.
func recordedOutcomes(env *testsuite.TestWorkflowEnvironment) *[]activities.RecordRunOutcomeInput {
	var got []activities.RecordRunOutcomeInput
	env.OnActivity(a.RecordRunOutcome, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordRunOutcomeInput) error {
			got = append(got, in)
			return nil
		})
	return &got
}

func TestScheduledRunAllocatesAndStartsEpisode(t *testing.T) {
	env := newEnv(t)
	key := AllocationKey("weekly-video", nominal())
	env.SetStartWorkflowOptions(startOptions(key))
	env.OnActivity(a.Allocate, mock.Anything, activities.AllocateInput{
		Pipeline: "weekly-video", Key: key, NominalTime: nominal(),
	}).Return(activities.AllocateResult{Decision: "allocated", Reason: "new_episode", EpisodeID: "2026-W32-0", Period: "2026-W32", Sequence: 0}, nil).Once()
	var episodeStarted EpisodeInput
	env.OnWorkflow(Episode, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in EpisodeInput) (EpisodeResult, error) {
			episodeStarted = in
			return EpisodeResult{}, nil
		})
	outcomes := recordedOutcomes(env)

	env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal()})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res ScheduledRunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := ScheduledRunResult{
		WorkflowID: key, Pipeline: "weekly-video", EpisodeID: "2026-W32-0", Period: "2026-W32", Sequence: 0,
		Outcome: allot.OutcomeAllocated, Reason: "new_episode", NominalTime: nominal(), NominalTimeSource: allot.NominalFromInput,
	}
	if res != want {
		t.Fatalf("result = %+v\nwant     %+v", res, want)
	}
	if episodeStarted != (EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-0"}) {
		t.Fatalf("Episode started with %+v", episodeStarted)
	}
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != allot.OutcomeAllocated || (*outcomes)[0].Reason != "new_episode" || (*outcomes)[0].EpisodeID != "2026-W32-0" {
		t.Fatalf("recorded outcomes = %+v", *outcomes)
	}
}

func TestScheduledRunNominalTimeSources(t *testing.T) {
	scheduled := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	started := time.Date(2027, 1, 5, 9, 30, 0, 0, time.UTC)
	cases := []struct {
		name       string
		input      time.Time
		searchAttr bool
		want       time.Time
		wantSource allot.NominalTimeSource
	}{
		{"input wins over schedule", nominal(), true, nominal(), allot.NominalFromInput},
		{"schedule when no input", time.Time{}, true, scheduled, allot.NominalFromSchedule},
		{"start time otherwise", time.Time{}, false, started, allot.NominalFromStartTime},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.SetStartTime(started)
			env.SetStartWorkflowOptions(startOptions("k-1"))
			if c.searchAttr {
				if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(ScheduledStartTimeAttr.ValueSet(scheduled))); err != nil {
					t.Fatal(err)
				}
			}
			var asked time.Time
			env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.AllocateInput) (activities.AllocateResult, error) {
					asked = in.NominalTime
					return activities.AllocateResult{Decision: "skipped", Reason: "cap_reached", Period: "p", Sequence: -1}, nil
				})
			outcomes := recordedOutcomes(env)
			env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: c.input})
			var res ScheduledRunResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if !asked.Equal(c.want) || !res.NominalTime.Equal(c.want) || res.NominalTimeSource != c.wantSource {
				t.Fatalf("asked %s, result %s from %s; want %s from %s", asked, res.NominalTime, res.NominalTimeSource, c.want, c.wantSource)
			}
			if (*outcomes)[0].NominalTimeSource != c.wantSource {
				t.Fatalf("recorded source %q, want %q", (*outcomes)[0].NominalTimeSource, c.wantSource)
			}
		})
	}
}

func TestScheduledRunSkipStartsNoEpisode(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(startOptions("k-2"))
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
		activities.AllocateResult{Decision: "skipped", Reason: "cap_reached", Period: "2026-W32", Sequence: -1}, nil)
	episodes := 0
	env.OnWorkflow(Episode, mock.Anything, mock.Anything).Return(
		func(workflow.Context, EpisodeInput) (EpisodeResult, error) { episodes++; return EpisodeResult{}, nil })
	outcomes := recordedOutcomes(env)
	env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal()})
	var res ScheduledRunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != allot.OutcomeSkipped || res.Reason != "cap_reached" || res.EpisodeID != "" || episodes != 0 {
		t.Fatalf("result %+v, episodes started %d", res, episodes)
	}
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != allot.OutcomeSkipped || (*outcomes)[0].Reason != "cap_reached" {
		t.Fatalf("skip not recorded with its reason: %+v", *outcomes)
	}
}

func TestScheduledRunInvariantFailureIsRecordedAndNotRetried(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(startOptions("k-3"))
	calls := 0
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.AllocateInput) (activities.AllocateResult, error) {
			calls++
			return activities.AllocateResult{}, temporal.NewNonRetryableApplicationError("bound elsewhere", allot.AllocationKeyCrossesPeriod, nil)
		})
	outcomes := recordedOutcomes(env)
	env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal()})
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("workflow error = %v, want type %s", err, allot.AllocationKeyCrossesPeriod)
	}
	if calls != 1 {
		t.Fatalf("non-retryable failure was attempted %d times", calls)
	}
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != allot.OutcomeFailed || (*outcomes)[0].Reason != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("failure not recorded with its type: %+v", *outcomes)
	}
}

func TestScheduledRunRetriesTransientAllocationFailure(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(startOptions("k-4"))
	calls := 0
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.AllocateInput) (activities.AllocateResult, error) {
			calls++
			if calls < 3 {
				return activities.AllocateResult{}, errors.New("database is locked")
			}
			return activities.AllocateResult{Decision: "reused", Reason: "key_bound", EpisodeID: "2026-W32-4", Period: "2026-W32", Sequence: 4}, nil
		})
	env.OnWorkflow(Episode, mock.Anything, mock.Anything).Return(EpisodeResult{}, nil)
	recordedOutcomes(env)
	env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal()})
	var res ScheduledRunResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if calls != 3 || res.Outcome != allot.OutcomeReused || res.EpisodeID != "2026-W32-4" {
		t.Fatalf("calls %d, result %+v", calls, res)
	}
}

func TestAllocationKeyMatchesScheduleForm(t *testing.T) {
	// A Schedule names its runs "<action id>-<nominal time, UTC, seconds>".
	in := time.Date(2026, 8, 3, 4, 0, 0, 999, time.FixedZone("CEST", 2*3600))
	if got, want := AllocationKey("weekly-video", in), "weekly-video/scheduled-2026-08-03T02:00:00Z"; got != want {
		t.Fatalf("AllocationKey = %q, want %q", got, want)
	}
}
