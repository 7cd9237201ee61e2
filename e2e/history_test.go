package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"allot"
	"allot/activities"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/protocoltest"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/step"
	"allot/workflows"
)

// TestSaveHistories writes the histories of one run of each workflow to
// ALLOT_TEST_SAVE_HISTORIES (a directory) for the replay tests in workflows/.
// Run it when a workflow changes shape on purpose, before the change:
//
//	ALLOT_TEST_SAVE_HISTORIES=$PWD/workflows/testdata/vN go test ./e2e -run TestSaveHistories
func TestSaveHistories(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	c := allottest.NewCluster(t)
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "weekly-video", NominalTime: time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC), Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("weekly-video", res.Result.EpisodeID)
	save := func(name, id string) { saveHistory(t, c, dir, name, id, "") }
	save("scheduled_run.json", res.WorkflowID)
	save("episode.json", allot.EpisodeWorkflowID("weekly-video", res.Result.EpisodeID))

	// A paid episode that parks on an unknown outcome, is resolved, waits at
	// the approval gate and is approved: every path of the Episode workflow.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("weekly-paid", monday())
	c.WaitStage("weekly-paid", ep, allot.StageNeedsAttention)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send("weekly-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: c.Vendor.Sim.Charges()[0].TaskID}); err != nil {
		t.Fatal(err)
	}
	c.WaitStage("weekly-paid", ep, allot.StageWaitingApproval)
	if _, err := c.Send("weekly-paid", ep, workflows.ApproveUpdate, workflows.DecisionRequest{Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("weekly-paid", ep)
	save("paid_episode.json", allot.EpisodeWorkflowID("weekly-paid", ep))
}

const customStepsTOML = `
[[vendor]]
name        = "notes"
adapter     = "go"
api_key_env = "ALLOT_HISTORY_NOTES_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers-vendor"
  [vendor.activities]
  submit = "CoversSubmit"
  lookup = "CoversLookup"
  status = "CoversStatus"
  fetch  = "CoversFetch"

[[pipeline]]
name = "custom"
  [[pipeline.step]]
  name = "count"
  kind = "go"
  func = "count"
  [[pipeline.step]]
  name    = "settle"
  kind    = "exec"
  command = ["sh", "-c", "echo 42 > total.txt"]
  outputs = ["total.txt"]
  [[pipeline.step]]
  name       = "score"
  kind       = "activity"
  activity   = "Score"
  task_queue = "scoring"
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"
  [[pipeline.step]]
  name   = "announce"
  kind   = "effect"
  vendor = "notes"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
`

// TestSaveHistoriesCustomSteps saves, with TestSaveHistories, the
// histories of the paths issue 9 added: go, exec and activity steps, a paid
// step through an activity adapter and an effect step through a Go
// adapter; and a ScheduledRun that finds its episode's workflow already
// running (the ledger check of the existing Episode).
func TestSaveHistoriesCustomSteps(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	t.Setenv("ALLOT_HISTORY_NOTES_KEY", allottest.VendorKey)
	c := allottest.NewClusterWithPipelines(t, []byte(customStepsTOML))
	notes := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: allottest.VendorKey, Seed: 3})
	covers := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: allottest.VendorKey, Seed: 4})
	c.Activities.Steps = map[string]step.Func{"count": func(ctx context.Context, in step.Input) (step.Output, error) {
		return step.Output{Result: json.RawMessage(`{"count":3}`)}, nil
	}}
	c.Activities.Vendors = map[string]activities.Vendor{"notes": {Credentials: paidvendor.VendorKey{Vendor: "notes", Env: "ALLOT_HISTORY_NOTES_KEY"}, New: protocoltest.Factory(notes)}}
	// The other teams' workers: a scoring activity, and the covers
	// vendor's adapter activities.
	for queue, register := range map[string]func(worker.Worker){
		"scoring": func(w worker.Worker) {
			w.RegisterActivityWithOptions(func(ctx context.Context, in step.Input) (step.Output, error) {
				return step.Output{Result: json.RawMessage(`{"score":0.9}`)}, nil
			}, activity.RegisterOptions{Name: "Score"})
		},
		"covers-vendor": func(w worker.Worker) {
			a := &protocoltest.Adapter{Client: protocoltest.NewInProcessClient(covers, allottest.VendorKey)}
			a.Register(w, protocoltest.Names{Submit: "CoversSubmit", Lookup: "CoversLookup", Status: "CoversStatus", Fetch: "CoversFetch"})
		},
	} {
		w := worker.New(c.Client, queue, worker.Options{})
		register(w)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}

	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "custom", NominalTime: nominal, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	ep := res.Result.EpisodeID
	c.WaitStage("custom", ep, allot.StageWaitingApproval)
	// The same key started again while the Episode waits: the run finds
	// the Episode running and checks it is this ledger's.
	again, err := c.Client.ExecuteWorkflow(c.Ctx(), client.StartWorkflowOptions{ID: res.WorkflowID, TaskQueue: workflows.TaskQueue},
		workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: "custom", NominalTime: nominal, LedgerID: c.Ledger.ID()})
	if err != nil {
		t.Fatal(err)
	}
	var rerun workflows.ScheduledRunResult
	if err := again.Get(c.Ctx(), &rerun); err != nil || rerun.Outcome != allot.OutcomeReused || rerun.EpisodeID != ep {
		t.Fatalf("the same key again: %+v, %v", rerun, err)
	}
	if _, err := c.Send("custom", ep, workflows.ApproveUpdate, workflows.DecisionRequest{Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	if st := c.WaitEpisode("custom", ep); st.Stage != allot.StageCompleted {
		t.Fatalf("custom episode ended %s", st.Stage)
	}
	saveHistory(t, c, dir, "custom_steps_episode.json", allot.EpisodeWorkflowID("custom", ep), "")
	saveHistory(t, c, dir, "scheduled_run_episode_running.json", res.WorkflowID, again.GetRunID())
}

func saveHistory(t *testing.T, c *allottest.Cluster, dir, name, id, runID string) {
	t.Helper()
	var events []*historypb.HistoryEvent
	iter := c.Client.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

const adapterFaultsTOML = `
[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers-vendor"
  [vendor.activities]
  submit = "CoversSubmit"
  lookup = "CoversLookup"
  status = "CoversStatus"
  fetch  = "CoversFetch"

[[pipeline]]
name = "adapter-faults"
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"
`

// TestSaveHistoriesAdapterFaults saves, with TestSaveHistories, the
// history of a paid step through an activity adapter that meets the faults
// the protocol loop exists for: the first send's answer is lost after the
// vendor accepted it (the next attempt asks by key), and the look-up does
// not answer for a whole batch of attempts (it is asked again after a
// pause). The replay test keeps the one protocol loop (payonce.Drive)
// faithful to the workflow driver it replaced.
func TestSaveHistoriesAdapterFaults(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	c := allottest.NewClusterWithPipelines(t, []byte(adapterFaultsTOML))
	covers := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: allottest.VendorKey, Seed: 5})
	a := &protocoltest.Adapter{Client: protocoltest.NewInProcessClient(covers, allottest.VendorKey)}
	a.BeforeSubmit = func(ctx context.Context, n int, req paidvendor.ActivitySubmitRequest) error {
		if n > 1 {
			return nil
		}
		// The vendor accepts the first send, and its answer is lost.
		if _, err := a.Client.Submit(ctx, paidvendor.SubmitRequest(req)); err != nil {
			return err
		}
		return errors.New("connection reset after the vendor accepted")
	}
	var lookups atomic.Int32
	w := worker.New(c.Client, "covers-vendor", worker.Options{})
	a.Register(w, protocoltest.Names{Submit: "CoversSubmit", Status: "CoversStatus", Fetch: "CoversFetch"})
	w.RegisterActivityWithOptions(func(ctx context.Context, req paidvendor.ActivityLookupRequest) (paidvendor.ActivityTask, error) {
		// A whole batch of look-up attempts gets no answer.
		if lookups.Add(1) <= 4 {
			return paidvendor.ActivityTask{}, errors.New("vendor unreachable")
		}
		return a.Lookup(ctx, req)
	}, activity.RegisterOptions{Name: "CoversLookup"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	ep := c.Allocate("adapter-faults", monday())
	if st := c.WaitEpisode("adapter-faults", ep); st.Stage != allot.StageCompleted {
		t.Fatalf("adapter-faults episode ended %s", st.Stage)
	}
	if n := len(covers.Charges()); n != 1 {
		t.Fatalf("the vendor charged %d times, want 1", n)
	}
	if n := lookups.Load(); n < 5 {
		t.Fatalf("the look-up was called %d times, want at least 5 (a batch without answer, then one)", n)
	}
	saveHistory(t, c, dir, "adapter_faults_episode.json", allot.EpisodeWorkflowID("adapter-faults", ep), "")
}

const vendorWaitTOML = `
[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers-vendor"
  [vendor.activities]
  submit = "CoversSubmit"
  lookup = "CoversLookup"
  status = "CoversStatus"
  fetch  = "CoversFetch"

[[pipeline]]
name = "vendor-wait"
  [[pipeline.step]]
  name = "video"
  kind = "paid"
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"
`

// TestSaveHistoriesVendorWait saves, with TestSaveHistories, the history of
// an episode whose two paid steps wait for their paused vendors (the
// default one through SubmitPaidTask, an activity adapter through
// PaidVendorGate behind the vendor-gate marker) and go on after resume: the
// shape of issue 17's waits, for later changes to replay. Since
// testdata/v11 the activity adapter's pass, which waited, is stale and
// asked for again, behind the vendor-gate-stale-pass marker.
func TestSaveHistoriesVendorWait(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	c := allottest.NewClusterWithPipelines(t, []byte(vendorWaitTOML))
	covers := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: allottest.VendorKey, Seed: 6})
	a := &protocoltest.Adapter{Client: protocoltest.NewInProcessClient(covers, allottest.VendorKey)}
	w := worker.New(c.Client, "covers-vendor", worker.Options{})
	a.Register(w, protocoltest.Names{Submit: "CoversSubmit", Lookup: "CoversLookup", Status: "CoversStatus", Fetch: "CoversFetch"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx := c.Ctx()
	for _, v := range []string{"default", "covers"} {
		if _, err := c.Ledger.PauseVendor(ctx, ledger.VendorPause{Vendor: v, Reason: "saving a history", By: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	ep := c.Allocate("vendor-wait", monday())
	c.WaitStage("vendor-wait", ep, allot.StageWaitingVendor)
	if _, err := c.Ledger.ResumeVendor(ctx, "default", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for {
		st := c.WaitStage("vendor-wait", ep, allot.StageWaitingVendor)
		if st.Waiting != nil && st.Waiting.Step == "cover" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.Ledger.ResumeVendor(ctx, "covers", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if st := c.WaitEpisode("vendor-wait", ep); st.Stage != allot.StageCompleted {
		t.Fatalf("vendor-wait episode ended %s", st.Stage)
	}
	if c.Vendor.Sim.ChargeCount() != 1 || len(covers.Charges()) != 1 {
		t.Fatalf("charges: %d and %d, want one each", c.Vendor.Sim.ChargeCount(), len(covers.Charges()))
	}
	saveHistory(t, c, dir, "vendor_wait_episode.json", allot.EpisodeWorkflowID("vendor-wait", ep), "")
}

// TestSaveHistoriesCatchUp saves, with TestSaveHistories, the history of a
// scheduled run whose time passed while no worker ran, and which its
// pipeline's catch-up policy (skip) records as skipped, missed_catch_up,
// behind the catch-up marker.
func TestSaveHistoriesCatchUp(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	const grace = time.Second
	c := allottest.NewClusterWithPipelines(t, catchUpPipelines("2s", grace.String()))
	c.StopWorker()
	if _, err := c.Schedules().Create(c.Ctx(), operator.ScheduleInput{Pipeline: "cu-skip"}); err != nil {
		t.Fatal(err)
	}
	ids := c.WaitAtLeast(`WorkflowType = "ScheduledRun" AND AllotPipeline = "cu-skip"`, 1)
	nominal, _ := allot.NominalTimeOfKey("cu-skip", ids[0])
	for time.Now().Before(nominal.Add(grace + 500*time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	c.StartWorker()
	var res workflows.ScheduledRunResult
	if err := c.Client.GetWorkflow(c.Ctx(), ids[0], "").Get(c.Ctx(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != allot.OutcomeSkipped || res.Reason != allot.ReasonMissedCatchUp {
		t.Fatalf("run %s: %+v, want skipped as missed_catch_up", ids[0], res)
	}
	saveHistory(t, c, dir, "scheduled_run_missed.json", ids[0], "")
}

// TestSaveHistoriesBatch saves, with TestSaveHistories, the histories of a
// paid step in batch mode: an episode that waits for its batch and the
// vendor's collector, whose first batch expires half way (its undone items
// go in a second batch), for later changes to replay.
func TestSaveHistoriesBatch(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	// Undone items wait for a second batch a second, not an hour.
	c := allottest.NewClusterWithPipelines(t, []byte(strings.Replace(batchPipelines, `batch_max_wait  = "1h"`, `batch_max_wait  = "1s"`, 1)))
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{BatchExpireHalfway: 1}); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for i := range 3 {
		eps = append(eps, c.Allocate("evals", monday().Add(time.Duration(i)*time.Hour)))
	}
	for c.Vendor.Sim.BatchCount() == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if st := c.WaitEpisode("evals", ep); st.Stage != allot.StageCompleted {
			t.Fatalf("batch episode %s ended %s", ep, st.Stage)
		}
	}
	if n := c.Vendor.Sim.BatchCount(); n < 2 {
		t.Fatalf("the vendor made %d batches, want the expired one and another", n)
	}
	saveHistory(t, c, dir, "batch_episode.json", allot.EpisodeWorkflowID("evals", eps[0]), "")
	saveHistory(t, c, dir, "batch_collector.json", allot.BatchCollectorID(pipeline.DefaultVendor, "score"), "")
}

// TestSaveHistoriesBatchStopped saves, with TestSaveHistories, the history
// of a collector whose batch meets an item abandoned in the ledger from
// outside while the batch runs: saved by the collector from before it drove
// a stopped batch again (testdata/v10), it replays the path that let such a
// batch go, behind the batch-stopped-retry marker.
func TestSaveHistoriesBatchStopped(t *testing.T) {
	dir := os.Getenv("ALLOT_TEST_SAVE_HISTORIES")
	if dir == "" {
		t.Skip("set ALLOT_TEST_SAVE_HISTORIES to a directory to save workflow histories")
	}
	c := allottest.NewClusterWithPipelines(t, []byte(batchPipelines))
	ctx := c.Ctx()
	var eps []string
	for i := range 3 {
		eps = append(eps, c.Allocate("evals", monday().Add(time.Duration(i)*time.Hour)))
	}
	for {
		bs, err := c.Ledger.UnendedBatches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) == 1 && bs[0].State == allot.BatchCreated {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, err := c.Ledger.Decide(ctx, ledger.DecisionRequest{OperatorDecision: ledger.OperatorDecision{RequestID: "outside-1", Pipeline: "evals", EpisodeID: eps[0],
		Step: "score", Action: allot.ActionAbandon, Reason: "abandoned in the ledger from outside", By: "test"}}); err != nil {
		t.Fatal(err)
	}
	id := allot.BatchCollectorID(pipeline.DefaultVendor, "score")
	if err := c.Client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	saveHistory(t, c, dir, "batch_collector_stopped.json", id, "")
}
