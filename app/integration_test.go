package app_test

import (
	"allot"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/temporaltest"

	"allot/activities"
	"allot/app"
	"allot/ledger"
	"allot/metrics"
	"allot/operator"
	"allot/pipeline"
	"allot/workflows"
)

// cluster is a real Temporal server in-process with an allot worker on it,
// a simulated paid vendor over HTTP, and a ledger in a temporary directory.
type cluster struct {
	t         *testing.T
	server    *temporaltest.TestServer
	client    client.Client
	namespace string
	dir       string
	ledger    *ledger.Ledger
	ledgerURL string
	pipelines *pipeline.Set
	acts      *activities.Activities
	runs      *operator.Runs
	commands  *operator.EpisodeCommands
	vendor    *vendorHarness
	logs      *syncBuffer
	// metricsURL serves the worker's Prometheus metrics.
	metricsURL string
}

const testPipelines = `
[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name = "weekly-paid"
  [[pipeline.step]]
  name = "video"
  kind = "paid"
  params = { resolution = "1080p" }
  [[pipeline.step]]
  name = "cover"
  kind = "paid"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name = "auto-paid"
auto_approve = true
  [[pipeline.step]]
  name = "video"
  kind = "paid"
  [[pipeline.step]]
  name = "cover"
  kind = "paid"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name = "capped"
period = "day"
max_episodes_per_period = 1
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterWith(t, testPipelines)
}

// newClusterWith is newCluster with the given pipeline definitions.
func newClusterWith(t *testing.T, pipelines string) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	logs := &syncBuffer{}
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	logger := slog.New(slog.NewTextHandler(logs, nil))
	m := metrics.New(led.EpisodesNeedingAttention, logger)
	t.Cleanup(func() { m.Close() })
	metricsServer := httptest.NewServer(m.HTTPHandler())
	t.Cleanup(metricsServer.Close)
	c := ts.NewClientWithOptions(client.Options{Logger: tlog.NewStructuredLogger(logger), MetricsHandler: m.Handler()})
	t.Cleanup(c.Close)
	if _, err := workflows.EnsureSearchAttributes(ctx, c, ts.GetDefaultNamespace()); err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.Parse([]byte(pipelines), "test")
	if err != nil {
		t.Fatal(err)
	}
	vendor := newVendorHarness(t)
	cl := &cluster{
		t: t, server: ts, client: c, namespace: ts.GetDefaultNamespace(), dir: dir,
		ledger: led, ledgerURL: url, pipelines: set, vendor: vendor, logs: logs, metricsURL: metricsServer.URL,
		acts: &activities.Activities{
			Ledger: led, Pipelines: set, ArtifactsDir: filepath.Join(dir, "artifacts"),
			Credentials: vendor.creds, NewVendor: vendor.factory, PollInterval: 20 * time.Millisecond,
		},
	}
	cl.runs = &operator.Runs{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue}
	cl.commands = &operator.EpisodeCommands{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue, Ledger: led}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(wctx, c, workflows.TaskQueue, cl.acts) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return cl
}

func (c *cluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c.t.Cleanup(cancel)
	return ctx
}

func (c *cluster) episodes(pipelineName string) []ledger.Episode {
	c.t.Helper()
	eps, err := c.ledger.ListEpisodes(context.Background(), pipelineName, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return eps
}

func (c *cluster) waitEpisode(pipelineName, episodeID string) workflows.EpisodeResult {
	c.t.Helper()
	var res workflows.EpisodeResult
	if err := c.client.GetWorkflow(c.ctx(), workflows.EpisodeWorkflowID(pipelineName, episodeID), "").Get(c.ctx(), &res); err != nil {
		c.t.Fatalf("episode %s: %v", episodeID, err)
	}
	return res
}

func (c *cluster) mustCheck() {
	c.t.Helper()
	res, err := operator.Check(context.Background(), c.ledger, "")
	if err != nil {
		c.t.Fatal(err)
	}
	if !res.OK {
		c.t.Fatalf("ledger check found violations: %+v", res.Violations)
	}
}

func appErrType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func TestRunAllocatesAndCompletesEpisode(t *testing.T) {
	c := newCluster(t)
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	res, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
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
	ep := c.waitEpisode("weekly-video", r.EpisodeID)
	if ep.Stage != allot.StageCompleted || len(ep.Steps) != 3 || ep.Steps[2].SHA256 == "" {
		t.Fatalf("episode = %+v", ep)
	}
	stored, err := c.ledger.Episode(context.Background(), "weekly-video", "2026-W32-0")
	if err != nil || stored.Status != ledger.EpisodeCompleted || stored.CompletedAt.IsZero() {
		t.Fatalf("ledger episode = %+v, %v", stored, err)
	}
	// The next run in the week gets the next sequence.
	res2, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal.Add(24 * time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Result.EpisodeID != "2026-W32-1" {
		t.Fatalf("second run = %+v", res2.Result)
	}
	// Search attributes make a pipeline's episodes findable.
	waitVisible(t, c, fmt.Sprintf(`AllotPipeline = "weekly-video" AND AllotEpisode = "2026-W32-0" AND WorkflowType = "Episode" AND AllotOutcome = "completed"`), 1)
	waitVisible(t, c, fmt.Sprintf(`AllotPipeline = "weekly-video" AND WorkflowType = "ScheduledRun" AND AllotOutcome = "allocated" AND AllotSequence = 1`), 1)
	c.mustCheck()
}

func waitVisible(t *testing.T, c *cluster, query string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace, Query: query})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if len(ids) == want {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %q found %d workflows %v, want %d", query, len(ids), ids, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestConcurrentDuplicateStartsShareOneEpisode(t *testing.T) {
	c := newCluster(t)
	nominal := time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC)
	const starters = 12
	var wg sync.WaitGroup
	results := make([]operator.RunResult, starters)
	errs := make([]error, starters)
	for i := range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
		}()
	}
	wg.Wait()
	for i := range starters {
		if errs[i] != nil {
			t.Fatalf("starter %d: %v", i, errs[i])
		}
		if results[i].Result.EpisodeID != "2026-W32-0" || results[i].RunID != results[0].RunID {
			t.Fatalf("starter %d got %+v, starter 0 got %+v", i, results[i], results[0])
		}
	}
	// Raw duplicate starts through the client with the same options attach too.
	for range 3 {
		run, err := c.client.ExecuteWorkflow(c.ctx(), operator.StartOptions(results[0].WorkflowID, workflows.TaskQueue, "weekly-video", nominal),
			workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: "weekly-video", NominalTime: nominal})
		var already interface{ Error() string }
		if err != nil && !errors.As(err, &already) {
			t.Fatal(err)
		}
		if err == nil && run.GetRunID() != results[0].RunID {
			t.Fatalf("a duplicate start created run %s", run.GetRunID())
		}
	}
	if eps := c.episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes, want 1: %+v", len(eps), eps)
	}
	c.waitEpisode("weekly-video", "2026-W32-0")
	c.mustCheck()
}

func TestAllocationRetriedAfterCommitReturnsSameEpisode(t *testing.T) {
	c := newCluster(t)
	var attempts atomic.Int32
	c.acts.AfterAllocate = func(ctx context.Context, res activities.AllocateResult) error {
		if attempts.Add(1) == 1 {
			return errors.New("injected: worker lost the response after the ledger committed")
		}
		return nil
	}
	first, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 5, 2, 0, 0, 0, time.UTC), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if attempts.Load() != 2 {
		t.Fatalf("allocation ran %d times, want 2 (one failed after commit, one retry)", attempts.Load())
	}
	if first.Result.EpisodeID != "2026-W32-0" || first.Result.Outcome != allot.OutcomeReused {
		t.Fatalf("retry result = %+v, want episode 2026-W32-0 reused", first.Result)
	}
	if eps := c.episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes after a retried allocation, want 1", len(eps))
	}
	c.mustCheck()
}

func TestFailedRunRerunGetsSameEpisode(t *testing.T) {
	c := newCluster(t)
	var fail atomic.Bool
	fail.Store(true)
	c.acts.AfterAllocate = func(ctx context.Context, res activities.AllocateResult) error {
		if fail.Load() {
			return temporal.NewNonRetryableApplicationError("injected crash after commit", "InjectedFailure", nil)
		}
		return nil
	}
	in := operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 6, 2, 0, 0, 0, time.UTC), Wait: true}
	if _, err := c.runs.Run(c.ctx(), in); appErrType(err) != "InjectedFailure" {
		t.Fatalf("first run error = %v, want the injected failure", err)
	}
	allocated := c.episodes("weekly-video")
	if len(allocated) != 1 {
		t.Fatalf("first run left %d episodes, want 1", len(allocated))
	}
	fail.Store(false)
	res, err := c.runs.Run(c.ctx(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != operator.RunStarted || res.Result.EpisodeID != allocated[0].ID || res.Result.Outcome != allot.OutcomeReused {
		t.Fatalf("re-run = %+v / %+v, want a new run reusing %s", res, res.Result, allocated[0].ID)
	}
	if eps := c.episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes after the re-run, want 1", len(eps))
	}
	outcomes, err := c.ledger.RunOutcomes(context.Background(), "weekly-video", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 2 || outcomes[0].Outcome != allot.OutcomeFailed || outcomes[0].Reason != "InjectedFailure" || outcomes[1].Outcome != allot.OutcomeReused {
		t.Fatalf("outcomes = %+v, want failed(InjectedFailure) then reused", outcomes)
	}
	c.mustCheck()
}

func TestFinishedKeyReportsExistingAndRefusesOtherPeriod(t *testing.T) {
	c := newCluster(t)
	nominal := time.Date(2026, 8, 7, 2, 0, 0, 0, time.UTC)
	first, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if again.Action != operator.RunExisting || again.RunID != first.RunID || again.Result.EpisodeID != first.Result.EpisodeID {
		t.Fatalf("second run = %+v, want the existing run %s reported", again, first.RunID)
	}
	// The same key for a nominal time in another week is refused, not reused.
	_, err = c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", Key: first.WorkflowID, NominalTime: nominal.AddDate(0, 0, 7)})
	if appErrType(err) != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("cross-period request error = %v, want %s", err, allot.AllocationKeyCrossesPeriod)
	}
	if n := countRuns(t, c, first.WorkflowID); n != 1 {
		t.Fatalf("key has %d runs, want 1: nothing may start", n)
	}
	if eps := c.episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes", len(eps))
	}
}

func TestLedgerRefusesCrossPeriodEvenWithoutTemporalHistory(t *testing.T) {
	// After Temporal's retention the workflow is gone but the ledger remembers:
	// a new run of the key for another period fails and writes nothing.
	c := newCluster(t)
	key := "weekly-video/manual-retention"
	if _, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "weekly-video", Key: key, NominalTime: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC), Wait: true}); err != nil {
		t.Fatal(err)
	}
	c.waitEpisode("weekly-video", "2026-W32-0")
	// AllowDuplicate stands in for a namespace whose retention forgot the run.
	run, err := c.client.ExecuteWorkflow(c.ctx(), client.StartWorkflowOptions{
		ID: key, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.ScheduledRun, workflows.ScheduledRunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 12, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(c.ctx(), nil)
	if appErrType(err) != allot.AllocationKeyCrossesPeriod {
		t.Fatalf("error = %v, want %s", err, allot.AllocationKeyCrossesPeriod)
	}
	if eps := c.episodes("weekly-video"); len(eps) != 1 {
		t.Fatalf("ledger has %d episodes, want 1", len(eps))
	}
}

func listRequest(c *cluster, query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace, Query: query}
}

func countRuns(t *testing.T, c *cluster, workflowID string) int {
	t.Helper()
	resp, err := c.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.namespace, Query: fmt.Sprintf("WorkflowId = %q", workflowID),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.GetExecutions())
}

func TestCapSkipsWithReason(t *testing.T) {
	c := newCluster(t)
	day := time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
	first, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "capped", NominalTime: day.Add(time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: "capped", NominalTime: day.Add(2 * time.Hour), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.Result.EpisodeID != "2026-08-03-0" || second.Result.Outcome != allot.OutcomeSkipped || second.Result.Reason != ledger.ReasonCapReached {
		t.Fatalf("first %+v, second %+v", first.Result, second.Result)
	}
	waitVisible(t, c, `AllotPipeline = "capped" AND AllotOutcome = "skipped"`, 1)
}

func TestScheduleRunsAreKeyedByNominalTimeAndManualRunReusesThem(t *testing.T) {
	c := newCluster(t)
	ctx := c.ctx()
	handle, err := c.client.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   workflows.ScheduleID("weekly-video"),
		Spec: client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: time.Second}}},
		Action: &client.ScheduleWorkflowAction{
			ID:        workflows.ScheduleActionID("weekly-video"),
			Workflow:  workflows.ScheduledRunWorkflow,
			Args:      []any{workflows.ScheduledRunInput{Pipeline: "weekly-video"}},
			TaskQueue: workflows.TaskQueue,
		},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := waitAtLeast(t, c, `WorkflowType = "ScheduledRun" AND ExecutionStatus = "Completed" AND AllotPipeline = "weekly-video"`, 2)
	if err := handle.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	prefix := workflows.ScheduleActionID("weekly-video") + "-"
	id := ids[0]
	if !strings.HasPrefix(id, prefix) {
		t.Fatalf("scheduled workflow ID %q does not start with %q", id, prefix)
	}
	nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, prefix))
	if err != nil {
		t.Fatalf("scheduled workflow ID %q does not end in a nominal time: %v", id, err)
	}
	var scheduled workflows.ScheduledRunResult
	if err := c.client.GetWorkflow(ctx, id, "").Get(ctx, &scheduled); err != nil {
		t.Fatal(err)
	}
	if scheduled.NominalTimeSource != allot.NominalFromSchedule || !scheduled.NominalTime.Equal(nominal) {
		t.Fatalf("scheduled run %s result %+v, want nominal %s from the schedule", id, scheduled, nominal)
	}
	if workflows.AllocationKey("weekly-video", nominal) != id {
		t.Fatalf("AllocationKey(%s) = %q, schedule formed %q", nominal, workflows.AllocationKey("weekly-video", nominal), id)
	}
	manual, err := c.runs.Run(ctx, operator.RunInput{Pipeline: "weekly-video", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if manual.Action != operator.RunExisting || manual.WorkflowID != id || manual.Result.EpisodeID != scheduled.EpisodeID {
		t.Fatalf("manual run = %+v / %+v, want the scheduled run's episode %s", manual, manual.Result, scheduled.EpisodeID)
	}
	c.mustCheck()
}

func waitAtLeast(t *testing.T, c *cluster, query string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := c.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetExecutions()) >= n {
			var ids []string
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %q found %d workflows, want at least %d", query, len(resp.GetExecutions()), n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestBadRunInputStartsNothing(t *testing.T) {
	c := newCluster(t)
	cases := []struct {
		name string
		in   operator.RunInput
		want string
	}{
		{"unknown pipeline", operator.RunInput{Pipeline: "monthly-podcast"}, "not defined"},
		{"bad pipeline name", operator.RunInput{Pipeline: "Weekly Video"}, "invalid"},
		{"key over 200 bytes", operator.RunInput{Pipeline: "weekly-video", Key: strings.Repeat("k", 201)}, "over the limit"},
		{"key with control character", operator.RunInput{Pipeline: "weekly-video", Key: "weekly\x00video"}, "control or invisible character"},
	}
	for _, tc := range cases {
		_, err := c.runs.Run(c.ctx(), tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	resp, err := c.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetExecutions()); n != 0 {
		t.Fatalf("bad input started %d workflows", n)
	}
	if eps := c.episodes("weekly-video"); len(eps) != 0 {
		t.Fatalf("bad input wrote %d episodes", len(eps))
	}
}
