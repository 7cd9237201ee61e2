package e2e

// Vendor controls (issue 17) on the embedded server with three workers
// sharing one ledger: each test asserts from the vendor's side (its
// /v1/stats and charges) what the workers let reach it.

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
	"allot/workflows"
)

// allocateMany starts n auto-paid runs at once (one per hour of monday's
// week) and returns their episodes.
func allocateMany(t *testing.T, c *allottest.Cluster, n int) []string {
	t.Helper()
	eps := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "auto-paid", NominalTime: monday().Add(time.Duration(i) * time.Hour), Wait: true})
			if err != nil {
				t.Error(err)
				return
			}
			eps[i] = res.Result.EpisodeID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return eps
}

// completeAll waits for every episode to complete and checks one charge
// per paid task (two per episode) and a clean ledger.
func completeAll(t *testing.T, c *allottest.Cluster, eps []string) {
	t.Helper()
	for _, ep := range eps {
		if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s: %+v", ep, final)
		}
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2*len(eps) {
		t.Fatalf("vendor charged %d times, want %d (one per paid step)", n, 2*len(eps))
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
	c.MustCheck()
}

// §1: a paused vendor gets no request while its episodes wait visibly
// (state query, AllotOutcome, the ledger's outcome as stats counts it),
// other work goes on, and after resume they complete by themselves with
// one charge each.
func TestPausedVendorGetsNothingThenEpisodesCompleteAfterResume(t *testing.T) {
	c := allottest.NewCluster(t)
	c.AddWorkers(2)
	ctx := c.Ctx()
	if _, err := operator.PauseVendor(ctx, c.Ledger, c.Pipelines, operator.VendorPauseInput{Name: pipeline.DefaultVendor, Reason: "bills twice", By: "oncall"}); err != nil {
		t.Fatal(err)
	}
	eps := allocateMany(t, c, 3)
	for _, ep := range eps {
		st := c.WaitStage("auto-paid", ep, allot.StageWaitingVendor)
		if w := st.Waiting; w == nil || w.Step != "video" || w.Vendor != pipeline.DefaultVendor || w.Reason != allot.ReasonVendorPaused || !strings.Contains(w.Message, "bills twice") {
			t.Fatalf("episode %s waits with %+v", ep, st.Waiting)
		}
	}
	c.WaitVisible(`AllotPipeline = "auto-paid" AND AllotOutcome = "waiting_vendor"`, 3)
	// Work that needs no vendor goes on meanwhile: a pipeline of local
	// steps allocates and completes while the vendor is paused.
	free := c.Allocate("weekly-video", monday())
	if final := c.WaitEpisode("weekly-video", free); final.Stage != allot.StageCompleted {
		t.Fatalf("a free episode while the vendor is paused: %+v", final)
	}
	stats, err := report.Stats(ctx, c.Ledger, report.StatsInput{Pipeline: "auto-paid", Pipelines: c.Pipelines})
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, o := range stats.Episodes {
		if o.Outcome == allot.OutcomeWaitingVendor && o.Reason == allot.ReasonVendorPaused {
			counted = o.Count
		}
	}
	if counted != 3 {
		t.Fatalf("stats count %d episodes waiting for the paused vendor: %+v", counted, stats.Episodes)
	}
	if st := c.Vendor.Sim.Stats(); st.Requests != 0 {
		t.Fatalf("the paused vendor got %d requests", st.Requests)
	}
	if _, err := operator.ResumeVendor(ctx, c.Ledger, c.Pipelines, pipeline.DefaultVendor); err != nil {
		t.Fatal(err)
	}
	completeAll(t, c, eps)
}

// §2: the breaker trips on a dead vendor (its episodes wait, tripped, with
// the vendor's error), lets one probe through per cool-down, and closes
// when the vendor is back; every task is charged once.
func TestBreakerTripsOnADeadVendorAndClosesWhenItReturns(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, allottest.PipelinesWithDefaultVendor("trip_after = 2\ncool_down = \"2s\""))
	c.AddWorkers(2)
	c.Vendor.Down(true)
	eps := allocateMany(t, c, 2)
	for _, ep := range eps {
		deadline := allottest.Deadline(t, time.Minute)
		for {
			st := c.WaitStage("auto-paid", ep, allot.StageWaitingVendor)
			if st.Waiting.Reason == allot.ReasonVendorTripped {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("episode %s waits with %+v, want tripped", ep, st.Waiting)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	s, err := c.Ledger.VendorStateOf(context.Background(), pipeline.DefaultVendor, time.Time{})
	if err != nil || s.Status() != "tripped" || !strings.Contains(s.Reason(), "tripped: ") || !strings.Contains(s.Reason(), "503") {
		t.Fatalf("vendor state %+v (%s), %v", s, s.Reason(), err)
	}
	if c.Vendor.Sim.ChargeCount() != 0 {
		t.Fatal("a dead vendor charged")
	}
	c.Vendor.Down(false)
	completeAll(t, c, eps)
	if s, err := c.Ledger.VendorStateOf(context.Background(), pipeline.DefaultVendor, time.Time{}); err != nil || s.Status() != "active" || s.Failures != 0 {
		t.Fatalf("after the vendor came back: %+v, %v", s, err)
	}
}

// §3: with max_in_flight = 1 and three workers, the vendor never serves two
// requests at once.
func TestMaxInFlightOneAcrossThreeWorkers(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, allottest.PipelinesWithDefaultVendor("max_in_flight = 1"))
	c.AddWorkers(2)
	// Slow answers, so that unlimited workers would overlap.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{Latency: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	eps := allocateMany(t, c, 5)
	completeAll(t, c, eps)
	if st := c.Vendor.Sim.Stats(); st.MaxInFlight != 1 || st.Submissions < 10 {
		t.Fatalf("vendor stats %+v: want at most 1 request at once; served at once: %q", st, c.Vendor.Sim.PeakInFlight())
	}
}

// §3: a rate of 1 submission per second with a burst of 2 holds at the
// vendor: never more than 3 submissions within one second.
func TestRateHoldsWithinItsBurst(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, allottest.PipelinesWithDefaultVendor("rate = 1.0\nburst = 2"))
	c.AddWorkers(2)
	eps := allocateMany(t, c, 5)
	completeAll(t, c, eps)
	if st := c.Vendor.Sim.Stats(); st.Submissions != 10 || st.MaxSubmissionsPerSecond > 3 {
		t.Fatalf("vendor stats %+v: want at most burst + rate = 3 submissions within a second", st)
	}
}

// §3: a worker killed while it holds the only slot gives it back when its
// lease expires (send_timeout + 5 s): the episodes complete, one charge
// each, and the vendor never serves two requests at once.
func TestKilledSlotHoldersSlotComesBack(t *testing.T) {
	c := allottest.NewCluster(t)
	bin := allottest.BuildBinary(t, "allot/worker")
	// Every answer takes 2 s, within the 3 s send_timeout: the kill lands
	// while a send holds the slot, and the vendor still serves that send
	// after its client is gone, as a real one would.
	vendor := allottest.NewVendor(t, paidvendortest.SimConfig{Seed: 5, TaskDuration: 100 * time.Millisecond, Latency: 2 * time.Second})
	pipelines := allottest.WritePipelines(t, c.Dir)
	const queue = "allot-slot-test"
	env := []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE=" + c.Namespace,
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(c.Dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER=" + c.LedgerURL,
		"ALLOT_PIPELINES=" + pipelines,
		"ALLOT_DATA_DIR=" + c.Dir,
		"ALLOT_TASK_QUEUE=" + queue,
		"ALLOT_VENDOR_URL=" + vendor.URL,
		"ALLOT_VENDOR_API_KEY=" + allottest.VendorKey,
		"ALLOT_VENDOR_MAX_IN_FLIGHT=1",
		"ALLOT_VENDOR_SEND_TIMEOUT=3s",
	}
	first := startWorker(t, bin, env)
	runs := &operator.Runs{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: queue}
	var eps []string
	for i := range 2 {
		res, err := runs.Run(c.Ctx(), operator.RunInput{Pipeline: "auto-paid", NominalTime: monday().Add(time.Duration(i) * time.Hour), Wait: true})
		if err != nil {
			t.Fatalf("%v\nworker output:\n%s", err, first.Output.String())
		}
		eps = append(eps, res.Result.EpisodeID)
	}
	// The vendor is serving the first send: its sender holds the only
	// slot. Kill it there.
	deadline := allottest.Deadline(t, time.Minute)
	for {
		s, err := c.Ledger.VendorStateOf(context.Background(), pipeline.DefaultVendor, time.Time{})
		if err == nil && s.InFlightSend == 1 && vendor.Sim.Stats().InFlight == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request held the slot; worker output:\n%s", first.Output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Signal(t, syscall.SIGKILL)
	if err := first.Wait(t, 30*time.Second); err == nil {
		t.Fatal("the worker was not killed")
	}
	if err := vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// The dead holder's slot is still taken, until its lease expires.
	if s, err := c.Ledger.VendorStateOf(context.Background(), pipeline.DefaultVendor, time.Time{}); err != nil || s.InFlightSend != 1 {
		t.Fatalf("after the kill: %+v, %v", s, err)
	}
	second := startWorker(t, bin, env)
	for _, ep := range eps {
		var final workflows.EpisodeResult
		ctx, cancel := allottest.Context(t, 2*time.Minute)
		err := c.Client.GetWorkflow(ctx, allot.EpisodeWorkflowID("auto-paid", ep), "").Get(ctx, &final)
		cancel()
		if err != nil || final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s: %+v, %v\nworker output:\n%s", ep, final, err, second.Output.String())
		}
	}
	if n := vendor.Sim.ChargeCount(); n != 4 {
		t.Fatalf("vendor charged %d times for 4 paid tasks", n)
	}
	vendor.AssertAtMostOneChargePerKey(t)
	if st := vendor.Sim.Stats(); st.MaxInFlight != 1 {
		t.Fatalf("vendor stats %+v: want at most 1 request at once", st)
	}
	s, err := c.Ledger.VendorStateOf(context.Background(), pipeline.DefaultVendor, time.Time{})
	if err != nil || s.InFlightSend+s.InFlightPoll != 0 {
		t.Fatalf("slots still taken at the end: %+v, %v", s, err)
	}
}

// §4: past the vendor's idempotency horizon, a send whose outcome is
// unknown parks the episode (IdempotencyHorizonPassed) instead of being
// looked up and sent again; the remedies are the table's, and an
// operator's resubmit sends it once.
func TestPastTheHorizonTheEpisodeParksForAPerson(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, allottest.PipelinesWithDefaultVendor("idempotency_horizon = \"1s\"\nsend_timeout = \"1s\""))
	// Every send fails without an answer, slower than the horizon.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{FailBeforeAccept: 1, Latency: 1200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
	want := []string{
		"starter episode lookup --pipeline auto-paid --episode " + ep + " --step video",
		"starter episode resolve --pipeline auto-paid --episode " + ep + " --step video --resubmit",
		"starter episode resolve --pipeline auto-paid --episode " + ep + " --step video --abandon --reason 'abandoned after IdempotencyHorizonPassed'",
	}
	if a := st.Attention; a == nil || a.ErrorType != allot.IdempotencyHorizonPassed || a.TaskState != allot.PaidIntent || strings.Join(a.Remedies, "\n") != strings.Join(want, "\n") {
		t.Fatalf("attention %+v", st.Attention)
	}
	submissions := c.Vendor.Sim.Stats().Submissions
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// A retry is not offered: it would only park again.
	if _, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionRetry}); allottest.ErrorType(err) != allot.NotReady {
		t.Fatalf("retry past the horizon: %v", err)
	}
	if _, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionResubmit, Reason: "not in the vendor's console"}); err != nil {
		t.Fatal(err)
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("after resubmit: %+v", final)
	}
	if st := c.Vendor.Sim.Stats(); st.Submissions < submissions+1 || c.Vendor.Sim.ChargeCount() != 2 {
		t.Fatalf("after resubmit: %+v, %d charges", st, c.Vendor.Sim.ChargeCount())
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
}
