package allottest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"

	"allot"
	"allot/activities"
	"allot/app"
	"allot/internal/deadline"
	"allot/internal/ledger"
	"allot/internal/metrics"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/workflows"
)

// Cluster is a real Temporal server in-process with an allot worker on it,
// a simulated paid vendor over HTTP, and a SQLite ledger in a temporary
// directory. Its methods fail the test that made it.
type Cluster struct {
	t *testing.T

	Server    *temporaltest.TestServer
	Client    client.Client // with the worker's logger and metrics
	Namespace string
	Dir       string // the test's temporary directory: ledger, artifacts
	Ledger    *ledger.Ledger
	LedgerURL string
	Pipelines *pipeline.Set
	// Activities are the worker's.
	Activities *activities.Activities
	Runs       *operator.Runs
	Commands   *operator.EpisodeCommands
	Vendor     *Vendor
	// Logs holds everything the worker and the client logged.
	Logs *SyncBuffer
	// MetricsURL serves the worker's Prometheus metrics at /metrics.
	MetricsURL string

	stopWorker    func() // nil while no worker runs
	afterAllocate atomic.Pointer[func(context.Context, activities.AllocateResult) error]
}

// SetAfterAllocate makes every Allocate that committed run hook before it
// returns; an error from hook is the attempt's, as a crash or a lost
// response after the write landed would be. nil removes it.
func (c *Cluster) SetAfterAllocate(hook func(context.Context, activities.AllocateResult) error) {
	if hook == nil {
		c.afterAllocate.Store(nil)
		return
	}
	c.afterAllocate.Store(&hook)
}

// NewCluster starts a cluster on the test pipelines (see Pipelines). It skips
// the test under -short. Everything stops when the test ends.
func NewCluster(t *testing.T) *Cluster {
	t.Helper()
	return NewClusterWithPipelines(t, pipelinesTOML)
}

// NewClusterWithPipelines is NewCluster with other pipeline definitions
// (TOML).
func NewClusterWithPipelines(t *testing.T, pipelinesTOML []byte) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded Temporal server")
	}
	ctx, cancel := Context(t, time.Minute)
	defer cancel()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	logs := &SyncBuffer{}
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	logger := slog.New(slog.NewTextHandler(logs, nil))
	set, err := pipeline.Parse(pipelinesTOML, "test")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(app.LedgerGauges(led, set), logger)
	t.Cleanup(func() { m.Close() })
	metricsServer := httptest.NewServer(m.HTTPHandler())
	t.Cleanup(metricsServer.Close)
	c := ts.NewClientWithOptions(client.Options{Logger: tlog.NewStructuredLogger(logger), MetricsHandler: m.Handler()})
	t.Cleanup(c.Close)
	if _, err := workflows.EnsureSearchAttributes(ctx, c, ts.GetDefaultNamespace()); err != nil {
		t.Fatal(err)
	}
	vendor := NewVendor(t, paidvendortest.SimConfig{Seed: 7, TaskDuration: 200 * time.Millisecond})
	cl := &Cluster{
		t: t, Server: ts, Client: c, Namespace: ts.GetDefaultNamespace(), Dir: dir,
		Ledger: led, LedgerURL: url, Pipelines: set, Vendor: vendor, Logs: logs, MetricsURL: metricsServer.URL,
		Activities: &activities.Activities{
			Ledger: led, Pipelines: set, ArtifactsDir: filepath.Join(dir, "artifacts"), Temporal: c,
			Credentials: vendor.Credentials, NewVendor: vendor.NewClient, PollInterval: 20 * time.Millisecond,
			EnqueueBatch: func(ctx context.Context, e activities.BatchEnqueue) error {
				return workflows.EnqueueBatchItem(ctx, c, e)
			},
			BatchPollEvery: 200 * time.Millisecond,
		},
	}
	// Its pipelines' deadlines are judged as the worker judges them, should
	// a test start their watches.
	cl.Activities.Deadlines = &deadline.Watcher{Ledger: led, Pipelines: set, Sources: app.DeadlineSources(c, set)}
	cl.Runs = &operator.Runs{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue, LedgerID: led.ID()}
	cl.Commands = &operator.EpisodeCommands{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue, Ledger: led}
	cl.StartWorker()
	t.Cleanup(cl.StopWorker)
	return cl
}

// StartWorker starts the cluster's worker (NewCluster starts one); it is a
// no-op while one runs.
func (c *Cluster) StartWorker() {
	if c.stopWorker != nil {
		return
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// The worker allot runs: its Stop waits for the attempts it cancelled,
	// which may still be writing to the test's directory.
	w := app.NewWorker(c.Client, workflows.TaskQueue, c.Activities)
	// Allocate with the test's hook (SetAfterAllocate), in place of the
	// registered one; the ScheduledRun finds it by name.
	w.RegisterActivityWithOptions(func(ctx context.Context, in activities.AllocateInput) (activities.AllocateResult, error) {
		res, err := c.Activities.Allocate(ctx, in)
		if hook := c.afterAllocate.Load(); err == nil && hook != nil {
			err = (*hook)(ctx, res)
		}
		return res, err
	}, activity.RegisterOptions{Name: "Allocate", DisableAlreadyRegisteredCheck: true})
	if err := w.Start(); err != nil {
		c.t.Fatalf("start worker: %v", err)
	}
	go func() {
		<-wctx.Done()
		w.Stop()
		done <- nil
	}()
	c.stopWorker = func() {
		stop()
		if err := <-done; err != nil {
			c.t.Error(err)
		}
	}
}

// StopWorker stops the cluster's worker and waits until it has stopped:
// an outage of the workers, until StartWorker.
func (c *Cluster) StopWorker() {
	if c.stopWorker != nil {
		c.stopWorker()
		c.stopWorker = nil
	}
}

// Ctx is a context for one call into the cluster: two minutes, cancelled
// when the test ends.
func (c *Cluster) Ctx() context.Context {
	ctx, cancel := Context(c.t, 2*time.Minute)
	c.t.Cleanup(cancel)
	return ctx
}

// Episodes lists the pipeline's episodes in the ledger.
func (c *Cluster) Episodes(pipelineName string) []ledger.Episode {
	c.t.Helper()
	eps, err := c.Ledger.ListEpisodes(context.Background(), pipelineName, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return eps
}

// PaidTasks lists the episode's paid tasks in the ledger.
func (c *Cluster) PaidTasks(pipelineName, episodeID string) []ledger.PaidTask {
	c.t.Helper()
	tasks, err := c.Ledger.PaidTasks(context.Background(), pipelineName, episodeID)
	if err != nil {
		c.t.Fatal(err)
	}
	return tasks
}

// KeysRun is every allocation key of a pipeline with a recorded run, and how
// many runs each had.
func (c *Cluster) KeysRun(pipelineName string) map[string]int {
	c.t.Helper()
	outcomes, err := c.Ledger.RunOutcomes(context.Background(), pipelineName, time.Time{})
	if err != nil {
		c.t.Fatal(err)
	}
	keys := map[string]int{}
	for _, o := range outcomes {
		keys[o.AllocationKey]++
	}
	return keys
}

// MustCheck fails the test if the ledger violates an invariant.
func (c *Cluster) MustCheck() {
	c.t.Helper()
	res, err := report.Check(context.Background(), c.Ledger, "")
	if err != nil {
		c.t.Fatal(err)
	}
	if !res.OK {
		c.t.Fatalf("ledger check found violations: %+v", res.Violations)
	}
}

// Allocate runs the pipeline once for nominal, waits for the ScheduledRun,
// and returns the episode it got.
func (c *Cluster) Allocate(pipelineName string, nominal time.Time) string {
	c.t.Helper()
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: pipelineName, NominalTime: nominal, Wait: true})
	if err != nil {
		c.t.Fatal(err)
	}
	return res.Result.EpisodeID
}

// WaitEpisode waits for the Episode workflow to finish and returns its result.
func (c *Cluster) WaitEpisode(pipelineName, episodeID string) workflows.EpisodeResult {
	c.t.Helper()
	var res workflows.EpisodeResult
	if err := c.Client.GetWorkflow(c.Ctx(), allot.EpisodeWorkflowID(pipelineName, episodeID), "").Get(c.Ctx(), &res); err != nil {
		c.t.Fatalf("episode %s: %v", episodeID, err)
	}
	return res
}

// WaitStage polls the Episode's state query until it reaches stage (60 s).
func (c *Cluster) WaitStage(pipelineName, episodeID string, stage allot.Stage) workflows.EpisodeState {
	c.t.Helper()
	return c.WaitState(pipelineName, episodeID, "stage "+string(stage), func(st workflows.EpisodeState) bool { return st.Stage == stage })
}

// WaitState polls the Episode's state query until ok holds for it (60 s);
// what names the condition in the failure.
func (c *Cluster) WaitState(pipelineName, episodeID, what string, ok func(workflows.EpisodeState) bool) workflows.EpisodeState {
	c.t.Helper()
	deadline := Deadline(c.t, 60*time.Second)
	var st workflows.EpisodeState
	for time.Now().Before(deadline) {
		v, err := c.Client.QueryWorkflow(context.Background(), allot.EpisodeWorkflowID(pipelineName, episodeID), "", workflows.StateQuery)
		if err == nil && v.Get(&st) == nil && ok(st) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("episode %s never reached %s; last state %+v", episodeID, what, st)
	return st
}

// Send sends an operator command (an Update) to the episode, as `starter
// episode` does.
func (c *Cluster) Send(pipelineName, episodeID, update string, req workflows.DecisionRequest) (operator.CommandResult, error) {
	return c.Commands.Send(c.Ctx(), operator.CommandInput{Pipeline: pipelineName, EpisodeID: episodeID, Update: update, Request: req})
}

// Schedules manages the pipelines' schedules on the cluster.
func (c *Cluster) Schedules() *operator.Schedules {
	return &operator.Schedules{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: workflows.TaskQueue, Namespace: c.Namespace, Ledger: c.Ledger}
}

// WorkflowIDs lists the IDs of the workflows a visibility query finds.
func (c *Cluster) WorkflowIDs(query string) []string {
	c.t.Helper()
	resp, err := c.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.Namespace, Query: query})
	if err != nil {
		c.t.Fatalf("list %q: %v", query, err)
	}
	ids := []string{}
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// CountWorkflows is len(WorkflowIDs(query)).
func (c *Cluster) CountWorkflows(query string) int {
	c.t.Helper()
	return len(c.WorkflowIDs(query))
}

// CountRuns counts the runs of one workflow ID.
func (c *Cluster) CountRuns(workflowID string) int {
	c.t.Helper()
	return c.CountWorkflows(fmt.Sprintf("WorkflowId = %q", workflowID))
}

// WaitVisible waits (30 s) until the query finds exactly want workflows, and
// returns their IDs. Visibility lags behind the workflows themselves.
func (c *Cluster) WaitVisible(query string, want int) []string {
	c.t.Helper()
	deadline := Deadline(c.t, 30*time.Second)
	for {
		ids := c.WorkflowIDs(query)
		if len(ids) == want {
			return ids
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("query %q found %d workflows %v, want %d", query, len(ids), ids, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitAtLeast waits (60 s) until the query finds at least n workflows, and
// returns their IDs.
func (c *Cluster) WaitAtLeast(query string, n int) []string {
	c.t.Helper()
	deadline := Deadline(c.t, 60*time.Second)
	for {
		ids := c.WorkflowIDs(query)
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("query %q found %d workflows, want at least %d", query, len(ids), n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
