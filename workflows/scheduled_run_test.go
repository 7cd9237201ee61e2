package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/pipeline"
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
	// A late scheduled run asks the catch-up policy; runs by default.
	env.OnActivity(a.DecideCatchUp, mock.Anything, mock.Anything).Return(activities.DecideCatchUpResult{CatchUpDecision: pipeline.CatchUpDecision{Run: true}, Policy: "all"}, nil).Maybe()
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
	key := allot.AllocationKey("weekly-video", nominal())
	env.SetStartWorkflowOptions(startOptions(key))
	// The run asks with its own run ID, so a lost reply's retry gets its
	// own answer back.
	env.OnActivity(a.Allocate, mock.Anything, activities.AllocateInput{
		Pipeline: "weekly-video", Key: key, NominalTime: nominal(), RunID: "default-test-run-id",
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
	keyed := time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		key        string
		input      time.Time
		attrs      []temporal.SearchAttributeUpdate
		want       time.Time
		wantSource allot.NominalTimeSource
	}{
		{"input wins over schedule", "weekly-video/k-1", nominal(), []temporal.SearchAttributeUpdate{ScheduledStartTimeAttr.ValueSet(scheduled)}, nominal(), allot.NominalFromInput},
		{"schedule when no input", "weekly-video/k-1", time.Time{}, []temporal.SearchAttributeUpdate{ScheduledStartTimeAttr.ValueSet(scheduled)}, scheduled, allot.NominalFromSchedule},
		{"the key's own time", allot.AllocationKey("weekly-video", keyed), time.Time{}, nil, keyed, allot.NominalFromKey},
		{"start time only for a Schedule's start", "weekly-video/k-1", time.Time{}, []temporal.SearchAttributeUpdate{ScheduledByIDAttr.ValueSet("weekly-video/schedule")}, started, allot.NominalFromStartTime},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.SetStartTime(started)
			env.SetStartWorkflowOptions(startOptions(c.key))
			if c.attrs != nil {
				if err := env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(c.attrs...)); err != nil {
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
	env.SetStartWorkflowOptions(startOptions("weekly-video/k-2"))
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
	env.SetStartWorkflowOptions(startOptions("weekly-video/k-3"))
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
	env.SetStartWorkflowOptions(startOptions("weekly-video/k-4"))
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

// Issue 8: a run cancelled while it allocates still records its outcome,
// failed with reason "canceled", on a disconnected context: on its own
// cancelled context the RecordRunOutcome activity would never be scheduled,
// and the key would have no outcome.
func TestCancelledScheduledRunRecordsItsOutcome(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(startOptions("weekly-video/k-cancel"))
	env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(activities.AllocateResult{}, errors.New("database is locked"))
	outcomes := recordedOutcomes(env)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal()})
	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != allot.OutcomeFailed || (*outcomes)[0].Reason != reasonCanceled {
		t.Fatalf("a cancelled run recorded %+v, want one failed outcome with reason %q", *outcomes, reasonCanceled)
	}
}

func TestAllocationKeyMatchesScheduleForm(t *testing.T) {
	// A Schedule names its runs "<action id>-<nominal time, UTC, seconds>".
	in := time.Date(2026, 8, 3, 4, 0, 0, 999, time.FixedZone("CEST", 2*3600))
	if got, want := allot.AllocationKey("weekly-video", in), "weekly-video/scheduled-2026-08-03T02:00:00Z"; got != want {
		t.Fatalf("AllocationKey = %q, want %q", got, want)
	}
}

// Issue 8: a key belongs to one pipeline and one nominal time. A start whose
// key is another pipeline's, whose custom key carries no nominal time, or
// whose input contradicts the key's time allocates nothing and fails with a
// named type; the wall clock never becomes a nominal time.
func TestScheduledRunRefusesKeysWithoutPipelineOrTime(t *testing.T) {
	for _, c := range []struct {
		name, key string
		input     time.Time
		wantType  string
	}{
		{"another pipeline's key", "daily-report/a/b/c", nominal(), allot.InvalidAllocationKey},
		{"no prefix at all", "a/b/c", nominal(), allot.InvalidAllocationKey},
		{"custom key without a time", "weekly-video/rerun-7", time.Time{}, allot.InvalidInput},
		{"input contradicts the key", allot.AllocationKey("weekly-video", nominal()), nominal().Add(24 * time.Hour), allot.InvalidInput},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.SetStartWorkflowOptions(startOptions(c.key))
			allocations := 0
			env.OnActivity(a.Allocate, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.AllocateInput) (activities.AllocateResult, error) {
					allocations++
					return activities.AllocateResult{}, nil
				}).Maybe()
			env.ExecuteWorkflow(ScheduledRun, ScheduledRunInput{Pipeline: "weekly-video", NominalTime: c.input})
			var appErr *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != c.wantType {
				t.Fatalf("error %v, want type %s", err, c.wantType)
			}
			if allocations != 0 {
				t.Fatalf("a refused start allocated %d times", allocations)
			}
		})
	}
}

func TestPlaceKey(t *testing.T) {
	known := []string{"weekly-video", "daily-report"}
	for _, c := range []struct{ key, want, wantErr string }{
		{"a/b/c", "weekly-video/a/b/c", ""},
		{"weekly-video/x", "weekly-video/x", ""},
		{"daily-report/a/b/c", "", "names pipeline daily-report"},
		{"   ", "", "blank"},
		{"", "", "blank"},
		// Reserved: an Episode's workflow ID, an imported run's key; as
		// given, and under the pipeline's prefix.
		{"episode/2026-W49-0", "", "leave --key out"},
		{"weekly-video/episode/2026-W49-0", "", "weekly-video/episode/"},
		{"legacy/a1", "", "imported old runs"},
		{"weekly-video/legacy/a1", "", "weekly-video/legacy/"},
		// Only the segment itself is reserved.
		{"episodes/a", "weekly-video/episodes/a", ""},
		{"a/legacy/b", "weekly-video/a/legacy/b", ""},
		{"episode", "weekly-video/episode", ""},
	} {
		got, err := allot.PlaceKey("weekly-video", c.key, known)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("allot.PlaceKey(%q) = %q, %v; want an error naming %q", c.key, got, err, c.wantErr)
			}
			if reserved := strings.Contains(c.key, "episode/") || strings.Contains(c.key, "legacy/"); reserved != errors.Is(err, allot.ErrReservedKey) {
				t.Errorf("allot.PlaceKey(%q): %v; allot.ErrReservedKey %v, want %v", c.key, err, errors.Is(err, allot.ErrReservedKey), reserved)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("allot.PlaceKey(%q) = %q, %v; want %q", c.key, got, err, c.want)
		}
	}
	if tm, ok := allot.NominalTimeOfKey("weekly-video", "weekly-video/scheduled-2026-08-03T02:00:00Z"); !ok || !tm.Equal(nominal()) {
		t.Errorf("NominalTimeOfKey = %s, %v", tm, ok)
	}
	for _, k := range []string{"weekly-video/scheduled-2026-08-03T02:00:00+02:00", "weekly-video/scheduled-yesterday", "daily-report/scheduled-2026-08-03T02:00:00Z"} {
		if _, ok := allot.NominalTimeOfKey("weekly-video", k); ok {
			t.Errorf("allot.NominalTimeOfKey(%q) found a time", k)
		}
	}
}
