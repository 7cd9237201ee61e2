package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/activities"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/workflows"
)

func TestRunAllocatesAndCompletesEpisode(t *testing.T) {
	c := allottest.NewCluster(t)
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != operator.RunStarted || res.WorkflowID != "weekly-video/scheduled-2026-08-03T02:00:00Z" {
		t.Fatalf("run = %+v", res)
	}
	r := res.Result
	if r.EpisodeID != "2026-W32-0" || r.Outcome != allot.OutcomeAllocated || r.NominalTimeSource != allot.NominalFromInput {
		t.Fatalf("result = %+v", r)
	}
	ep := c.WaitEpisode("weekly-video", r.EpisodeID)
	if ep.Stage != allot.StageCompleted || len(ep.Steps) != 3 || ep.Steps[2].SHA256 == "" {
		t.Fatalf("episode = %+v", ep)
	}
	stored, err := c.Ledger.Episode(context.Background(), "weekly-video", "2026-W32-0")
	if err != nil || stored.Status != ledger.EpisodeCompleted || stored.CompletedAt.IsZero() {
		t.Fatalf("ledger episode = %+v, %v", stored, err)
	}
	// The next run in the week gets the next sequence.
	res2, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal.Add(24 * time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Result.EpisodeID != "2026-W32-1" {
		t.Fatalf("second run = %+v", res2.Result)
	}
	// Search attributes make a pipeline's episodes findable.
	c.WaitVisible(`AllotPipeline = "weekly-video" AND AllotEpisode = "2026-W32-0" AND WorkflowType = "Episode" AND AllotOutcome = "completed"`, 1)
	c.WaitVisible(`AllotPipeline = "weekly-video" AND WorkflowType = "ScheduledRun" AND AllotOutcome = "allocated" AND AllotSequence = 1`, 1)
	c.MustCheck()
}

func TestConcurrentDuplicateStartsShareOneEpisode(t *testing.T) {
	c := allottest.NewCluster(t)
	nominal := time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC)
	const starters = 12
	var wg sync.WaitGroup
	results := make([]operator.RunResult, starters)
	errs := make([]error, starters)
	for i := range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
		}()
	}
	wg.Wait()
	started := 0
	for i := range starters {
		if errs[i] != nil {
			t.Fatalf("starter %d: %v", i, errs[i])
		}
		if results[i].Result.EpisodeID != "2026-W32-0" || results[i].RunID != results[0].RunID {
			t.Fatalf("starter %d got %+v, starter 0 got %+v", i, results[i], results[0])
		}
		// Issue 8: one start started the run; every other one says it
		// attached to it (or found it finished), never "started".
		switch results[i].Action {
		case operator.RunStarted:
			started++
		case operator.RunAttached, operator.RunExisting:
		default:
			t.Fatalf("starter %d reported %q", i, results[i].Action)
		}
	}
	if started != 1 {
		t.Fatalf("%d of %d concurrent starts reported %q, want exactly 1", started, starters, operator.RunStarted)
	}
	// Raw duplicate starts through the client with the same options attach too.
	for range 3 {
		run, err := c.Client.ExecuteWorkflow(c.Ctx(), workflows.ScheduledRunStartOptions(operator.RunReusePolicy, workflows.ScheduledRunStart{Pipeline: "weekly-video", Run: allot.RunKey{Key: results[0].WorkflowID, Nominal: nominal}, TaskQueue: workflows.TaskQueue}),
			workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal})
		var already interface{ Error() string }
		if err != nil && !errors.As(err, &already) {
			t.Fatal(err)
		}
		if err == nil && run.GetRunID() != results[0].RunID {
			t.Fatalf("a duplicate start created run %s", run.GetRunID())
		}
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes, want 1: %+v", len(eps), eps)
	}
	c.WaitEpisode("weekly-video", "2026-W32-0")
	c.MustCheck()
}

// Issue 8: a run whose Allocate committed but whose reply was lost gets its
// own answer back on the retry (allocated/new_episode, not reused), so
// every episode has exactly one run recorded as its allocation.
func TestAllocationRetriedAfterCommitReturnsSameEpisode(t *testing.T) {
	c := allottest.NewCluster(t)
	var attempts atomic.Int32
	c.SetAfterAllocate(func(ctx context.Context, res activities.AllocateResult) error {
		if attempts.Add(1) == 1 {
			return errors.New("injected: worker lost the response after the ledger committed")
		}
		return nil
	})
	first, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 5, 2, 0, 0, 0, time.UTC), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if attempts.Load() != 2 {
		t.Fatalf("allocation ran %d times, want 2 (one failed after commit, one retry)", attempts.Load())
	}
	if first.Result.EpisodeID != "2026-W32-0" || first.Result.Outcome != allot.OutcomeAllocated || first.Result.Reason != allot.ReasonNewEpisode {
		t.Fatalf("retry result = %+v, want episode 2026-W32-0 allocated/new_episode: the allocating run's own answer", first.Result)
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes after a retried allocation, want 1", len(eps))
	}
	outcomes, err := c.Ledger.RunOutcomes(c.Ctx(), "weekly-video", time.Time{})
	if err != nil || len(outcomes) != 1 || outcomes[0].Outcome != allot.OutcomeAllocated {
		t.Fatalf("run outcomes %+v, %v; want the one run recorded as allocated", outcomes, err)
	}
	c.MustCheck()
}

func TestFailedRunRerunGetsSameEpisode(t *testing.T) {
	c := allottest.NewCluster(t)
	var fail atomic.Bool
	fail.Store(true)
	c.SetAfterAllocate(func(ctx context.Context, res activities.AllocateResult) error {
		if fail.Load() {
			return temporal.NewNonRetryableApplicationError("injected crash after commit", "InjectedFailure", nil)
		}
		return nil
	})
	in := operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 6, 2, 0, 0, 0, time.UTC), Wait: true}
	if _, err := c.Runs.Run(c.Ctx(), in); allottest.ErrorType(err) != "InjectedFailure" {
		t.Fatalf("first run error = %v, want the injected failure", err)
	}
	allocated := c.Episodes("weekly-video")
	if len(allocated) != 1 {
		t.Fatalf("first run left %d episodes, want 1", len(allocated))
	}
	fail.Store(false)
	res, err := c.Runs.Run(c.Ctx(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != operator.RunStarted || res.Result.EpisodeID != allocated[0].ID || res.Result.Outcome != allot.OutcomeReused {
		t.Fatalf("re-run = %+v / %+v, want a new run reusing %s", res, res.Result, allocated[0].ID)
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes after the re-run, want 1", len(eps))
	}
	outcomes, err := c.Ledger.RunOutcomes(context.Background(), "weekly-video", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 2 || outcomes[0].Outcome != allot.OutcomeFailed || outcomes[0].Reason != "InjectedFailure" || outcomes[1].Outcome != allot.OutcomeReused {
		t.Fatalf("outcomes = %+v, want failed(InjectedFailure) then reused", outcomes)
	}
	c.MustCheck()
}

func TestFinishedKeyReportsExistingAndRefusesOtherPeriod(t *testing.T) {
	c := allottest.NewCluster(t)
	nominal := time.Date(2026, 8, 7, 2, 0, 0, 0, time.UTC)
	first, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if again.Action != operator.RunExisting || again.RunID != first.RunID || again.Result.EpisodeID != first.Result.EpisodeID {
		t.Fatalf("second run = %+v, want the existing run %s reported", again, first.RunID)
	}
	// The Schedule's key for one nominal time asked for another is refused:
	// the key carries its time.
	_, err = c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", Key: first.WorkflowID, NominalTime: nominal.AddDate(0, 0, 7)})
	if allottest.ErrorType(err) != allot.InvalidInput {
		t.Fatalf("a scheduled key asked for another time: error %v, want %s", err, allot.InvalidInput)
	}
	// A custom key bound in one week and asked for the next is refused, not
	// reused.
	custom, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", Key: "rerun-1", NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", Key: "rerun-1", NominalTime: nominal.AddDate(0, 0, 7)})
	if allottest.ErrorType(err) != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("cross-period request error = %v, want %s", err, allot.AllocationKeyCrossesPeriod)
	}
	for _, key := range []string{first.WorkflowID, custom.WorkflowID} {
		if n := c.CountRuns(key); n != 1 {
			t.Fatalf("key %s has %d runs, want 1: nothing may start", key, n)
		}
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 2 {
		t.Fatalf("ledger has %d episodes, want 2", len(eps))
	}
}

func TestLedgerRefusesCrossPeriodEvenWithoutTemporalHistory(t *testing.T) {
	// After Temporal's retention the workflow is gone but the ledger remembers:
	// a new run of the key for another period fails and writes nothing.
	c := allottest.NewCluster(t)
	key := "weekly-video/manual-retention"
	if _, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", Key: key, NominalTime: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC), Wait: true}); err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("weekly-video", "2026-W32-0")
	// AllowDuplicate stands in for a namespace whose retention forgot the run.
	run, err := c.Client.ExecuteWorkflow(c.Ctx(), client.StartWorkflowOptions{
		ID: key, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.ScheduledRun, workflows.ScheduledRunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 12, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(c.Ctx(), nil)
	if allottest.ErrorType(err) != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("error = %v, want %s", err, allot.AllocationKeyCrossesPeriod)
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes, want 1", len(eps))
	}
}

func TestCapSkipsWithReason(t *testing.T) {
	c := allottest.NewCluster(t)
	day := time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
	first, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "capped", NominalTime: day.Add(time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "capped", NominalTime: day.Add(2 * time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.Result.EpisodeID != "2026-08-03-0" || second.Result.Outcome != allot.OutcomeSkipped || second.Result.Reason != ledger.ReasonCapReached {
		t.Fatalf("first %+v, second %+v", first.Result, second.Result)
	}
	c.WaitVisible(`AllotPipeline = "capped" AND AllotOutcome = "skipped"`, 1)
}

func TestScheduleRunsAreKeyedByNominalTimeAndManualRunReusesThem(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	handle, err := c.Client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   allot.ScheduleID("weekly-video"),
		Spec: client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Second}}},
		Action: &client.ScheduleWorkflowAction{
			ID:        allot.ScheduleActionID("weekly-video"),
			Workflow:  workflows.ScheduledRunWorkflow,
			Args:      []any{workflows.ScheduledRunInput{Pipeline: "weekly-video"}},
			TaskQueue: workflows.TaskQueue,
		},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := c.WaitAtLeast(`WorkflowType = "ScheduledRun" AND ExecutionStatus = "Completed" AND AllotPipeline = "weekly-video"`, 2)
	if err := handle.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	prefix := allot.ScheduleActionID("weekly-video") + "-"
	id := ids[0]
	if !strings.HasPrefix(id, prefix) {
		t.Fatalf("scheduled workflow ID %q does not start with %q", id, prefix)
	}
	nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, prefix))
	if err != nil {
		t.Fatalf("scheduled workflow ID %q does not end in a nominal time: %v", id, err)
	}
	var scheduled workflows.ScheduledRunResult
	if err := c.Client.GetWorkflow(ctx, id, "").Get(ctx, &scheduled); err != nil {
		t.Fatal(err)
	}
	if scheduled.NominalTimeSource != allot.NominalFromSchedule || !scheduled.NominalTime.Equal(nominal) {
		t.Fatalf("scheduled run %s result %+v, want nominal %s from the schedule", id, scheduled, nominal)
	}
	if allot.AllocationKey("weekly-video", nominal) != id {
		t.Fatalf("AllocationKey(%s) = %q, schedule formed %q", nominal, allot.AllocationKey("weekly-video", nominal), id)
	}
	manual, err := c.Runs.Run(ctx, operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if manual.Action != operator.RunExisting || manual.WorkflowID != id || manual.Result.EpisodeID != scheduled.EpisodeID {
		t.Fatalf("manual run = %+v / %+v, want the scheduled run's episode %s", manual, manual.Result, scheduled.EpisodeID)
	}
	c.MustCheck()
}

func TestBadRunInputStartsNothing(t *testing.T) {
	c := allottest.NewCluster(t)
	cases := []struct {
		name string
		in   operator.RunInput
		want string
	}{
		{"unknown pipeline", operator.RunInput{Pipeline: "monthly-podcast"}, "not defined"},
		{"bad pipeline name", operator.RunInput{Pipeline: "Weekly Video"}, "invalid"},
		{"key over 200 bytes", operator.RunInput{Pipeline: "weekly-video", Key: strings.Repeat("k", 201)}, "over the limit"},
		{"key with control character", operator.RunInput{Pipeline: "weekly-video", Key: "weekly\x00video"}, "control or invisible character"},
		{"blank key", operator.RunInput{Pipeline: "weekly-video", Key: "   "}, "blank"},
		{"another pipeline's key", operator.RunInput{Pipeline: "weekly-video", Key: "capped/a/b/c", NominalTime: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)}, "names pipeline capped"},
		{"custom key without a nominal time", operator.RunInput{Pipeline: "weekly-video", Key: "a/b/c"}, "carries no nominal time"},
		{"the zero time's key", operator.RunInput{Pipeline: "weekly-video", Key: "weekly-video/scheduled-0001-01-01T00:00:00Z"}, "zero time"},
		{"a nominal time far ahead", operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)}, "ahead of now"},
	}
	for _, tc := range cases {
		_, err := c.Runs.Run(c.Ctx(), tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	resp, err := c.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetExecutions()); n != 0 {
		t.Fatalf("bad input started %d workflows", n)
	}
	if eps := c.Episodes("weekly-video"); len(eps) != 0 {
		t.Fatalf("bad input wrote %d episodes", len(eps))
	}
}
