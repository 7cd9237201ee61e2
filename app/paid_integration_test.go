package app_test

import (
	"allot"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"allot/activities"
	"allot/ledger"
	"allot/operator"
	"allot/paidvendor"
	"allot/workflows"
)

// vendorKey is the vendor API key of the tests; it must never show up in
// histories or logs.
const vendorKey = "sk-allot-test-7d1f2c9a-DO-NOT-LEAK"

// vendorHarness is the simulated vendor on a real HTTP server, with counters
// that show when credentials were read and clients built.
type vendorHarness struct {
	sim     *paidvendor.Simulator
	server  *httptest.Server
	corrupt atomic.Bool // serve results that do not match their sha256
	reads   atomic.Int32
	builds  atomic.Int32
	creds   activities.CredentialsSource
	factory activities.VendorFactory
}

type countingCreds struct{ h *vendorHarness }

func (c countingCreds) VendorAPIKey(context.Context) (string, error) {
	c.h.reads.Add(1)
	return vendorKey, nil
}

func newVendorHarness(t *testing.T) *vendorHarness {
	t.Helper()
	h := &vendorHarness{sim: paidvendor.NewSimulator(paidvendor.SimConfig{APIKey: vendorKey, Seed: 7, TaskDuration: 200 * time.Millisecond})}
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.corrupt.Load() && strings.HasSuffix(r.URL.Path, "/result") {
			rec := httptest.NewRecorder()
			h.sim.ServeHTTP(rec, r)
			w.WriteHeader(rec.Code)
			_, _ = w.Write(append(rec.Body.Bytes(), " tampered"...))
			return
		}
		h.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(h.server.Close)
	h.creds = countingCreds{h}
	http := activities.HTTPVendor(h.server.URL)
	h.factory = func(key string) (paidvendor.Client, error) {
		h.builds.Add(1)
		return http(key)
	}
	return h
}

// chargesPerKey counts the vendor's charges per idempotency key.
func (h *vendorHarness) chargesPerKey() map[string]int {
	out := map[string]int{}
	for _, ch := range h.sim.Charges() {
		out[ch.IdempotencyKey]++
	}
	return out
}

func (h *vendorHarness) assertAtMostOneChargePerKey(t *testing.T) {
	t.Helper()
	for key, n := range h.chargesPerKey() {
		if n > 1 {
			t.Fatalf("idempotency key %s was charged %d times", key, n)
		}
	}
}

// syncBuffer collects the worker's logs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// allocate runs the pipeline once and returns the episode it got.
func (c *cluster) allocate(pipelineName string, nominal time.Time) string {
	c.t.Helper()
	res, err := c.runs.Run(c.ctx(), operator.RunInput{Pipeline: pipelineName, NominalTime: nominal, Wait: true})
	if err != nil {
		c.t.Fatal(err)
	}
	return res.Result.EpisodeID
}

// waitStage polls the Episode's state query until it reaches stage.
func (c *cluster) waitStage(pipelineName, episodeID string, stage allot.Stage) workflows.EpisodeState {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var st workflows.EpisodeState
	for time.Now().Before(deadline) {
		v, err := c.client.QueryWorkflow(context.Background(), workflows.EpisodeWorkflowID(pipelineName, episodeID), "", workflows.StateQuery)
		if err == nil && v.Get(&st) == nil && st.Stage == stage {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("episode %s never reached stage %s; last state %+v", episodeID, stage, st)
	return st
}

func (c *cluster) send(pipelineName, episodeID, update string, req workflows.DecisionRequest) (operator.CommandResult, error) {
	return c.commands.Send(c.ctx(), operator.CommandInput{Pipeline: pipelineName, EpisodeID: episodeID, Update: update, Request: req})
}

func (c *cluster) paidTasks(pipelineName, episodeID string) []ledger.PaidTask {
	c.t.Helper()
	tasks, err := c.ledger.PaidTasks(context.Background(), pipelineName, episodeID)
	if err != nil {
		c.t.Fatal(err)
	}
	return tasks
}

func monday() time.Time { return time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC) }

func TestPaidEpisodeWithApprovalChargesOncePerStep(t *testing.T) {
	c := newCluster(t)
	ep := c.allocate("weekly-paid", monday())
	st := c.waitStage("weekly-paid", ep, allot.StageWaitingApproval)
	for _, s := range st.Steps[:2] {
		if s.Status != allot.StepCompleted || s.RemoteRef == "" || s.CostAmount != paidvendor.DefaultSimPrice.Amount || s.SHA256 == "" {
			t.Fatalf("paid step before approval: %+v", s)
		}
	}
	waitVisible(t, c, `AllotPipeline = "weekly-paid" AND AllotOutcome = "waiting_approval"`, 1)
	if _, err := c.send("weekly-paid", ep, workflows.ApproveUpdate, workflows.DecisionRequest{Reason: "looks good"}); err != nil {
		t.Fatal(err)
	}
	final := c.waitEpisode("weekly-paid", ep)
	if final.Stage != allot.StageCompleted || final.Steps[4].Status != allot.StepCompleted {
		t.Fatalf("final state %+v", final)
	}
	if n := c.vendor.sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (video, cover)", n)
	}
	show, err := operator.Show(context.Background(), c.ledger, c.client, "weekly-paid", ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(show.PaidTasks) != 2 || len(show.Costs) != 2 || show.Totals["USD"] != 2*paidvendor.DefaultSimPrice.Amount {
		t.Fatalf("show = %+v", show)
	}
	if len(show.Decisions) != 1 || show.Decisions[0].Action != allot.ActionApprove || show.Decisions[0].Reason != "looks good" {
		t.Fatalf("decisions = %+v", show.Decisions)
	}
	manifest, err := os.ReadFile(c.dir + "/artifacts/weekly-paid/" + ep + "/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range show.PaidTasks {
		if !strings.Contains(string(manifest), task.SHA256) {
			t.Fatalf("manifest lacks %s's sha256: %s", task.Step, manifest)
		}
	}
	costs, err := operator.Costs(context.Background(), c.ledger, operator.CostsInput{Pipeline: "weekly-paid", Period: "2026-W32"})
	if err != nil || len(costs.Lines) != 2 || costs.Totals["USD"] != 500 {
		t.Fatalf("costs = %+v, %v", costs, err)
	}
	c.mustCheck()
}

func TestLostResponseIsAdoptedByLookup(t *testing.T) {
	c := newCluster(t)
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	ep := c.allocate("auto-paid", monday())
	final := c.waitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.vendor.sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2: every lost response must be adopted, not resubmitted", n)
	}
	for _, task := range c.paidTasks("auto-paid", ep) {
		if task.State != allot.PaidSucceeded || task.RemoteRef == "" {
			t.Fatalf("paid task %+v", task)
		}
	}
	c.mustCheck()
}

func TestUnknownOutcomeWithoutLookupNeedsAttentionThenAdopt(t *testing.T) {
	c := newCluster(t)
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.allocate("auto-paid", monday())
	st := c.waitStage("auto-paid", ep, allot.StageNeedsAttention)
	if st.Attention == nil || st.Attention.Step != "video" || st.Attention.ErrorType != allot.OutcomeUnknown || !strings.Contains(st.Attention.Remedy, "resolve") {
		t.Fatalf("attention = %+v", st.Attention)
	}
	waitVisible(t, c, `AllotPipeline = "auto-paid" AND AllotOutcome = "needs_attention"`, 1)
	// Parked: no second submission, however long it waits.
	time.Sleep(500 * time.Millisecond)
	if n := c.vendor.sim.ChargeCount(); n != 1 {
		t.Fatalf("vendor charged %d times while parked, want 1", n)
	}
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// Bad references are refused and change nothing.
	for ref, want := range map[string]string{
		"not-a-vendor-ref":                    allot.InvalidRemoteRef,
		"vt_00000000000000000000000000000000": allot.InvalidRemoteRef,
	} {
		_, err := c.send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: ref})
		if appErrType(err) != want {
			t.Fatalf("adopt %q: error %v, want %s", ref, err, want)
		}
	}
	if _, err := c.send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "cover", Resolve: allot.ActionResubmit}); appErrType(err) != allot.NotReady {
		t.Fatalf("resolving a step without an unknown outcome: %v, want %s", err, allot.NotReady)
	}
	ref := c.vendor.sim.Charges()[0].TaskID
	res, err := c.send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: ref, Reason: "found in the vendor console"})
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Steps[0].RemoteRef != ref {
		t.Fatalf("after adopt: %+v", res.State.Steps[0])
	}
	final := c.waitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.vendor.sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (one per step)", n)
	}
	decisions, err := c.ledger.Decisions(context.Background(), "auto-paid", ep)
	if err != nil || len(decisions) < 2 || decisions[0].Action != allot.ActionAdopt || decisions[0].Reason != "found in the vendor console" {
		t.Fatalf("decisions = %+v, %v", decisions, err)
	}
	c.mustCheck()
}

func TestVendorIgnoringIdempotencyWithFaultsNeverChargesTwice(t *testing.T) {
	c := newCluster(t)
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{IgnoreIdempotency: true, LoseResponseAfterAccept: 0.4, FailBeforeAccept: 0.4}); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for i := range 3 {
		eps = append(eps, c.allocate("auto-paid", monday().Add(time.Duration(i)*time.Hour)))
	}
	for _, ep := range eps {
		if final := c.waitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s: %+v", ep, final)
		}
	}
	c.vendor.assertAtMostOneChargePerKey(t)
	if n := c.vendor.sim.ChargeCount(); n != 6 {
		t.Fatalf("vendor charged %d times, want 6 (3 episodes x 2 paid steps)", n)
	}
	c.mustCheck()
}

func TestServerErrorBeforeAcceptIsRetriedWithOneCharge(t *testing.T) {
	c := newCluster(t)
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{FailBeforeAccept: 1}); err != nil {
		t.Fatal(err)
	}
	ep := c.allocate("auto-paid", monday())
	// Wait until the submission has failed at least twice.
	id := workflows.EpisodeWorkflowID("auto-paid", ep)
	deadline := time.Now().Add(30 * time.Second)
	for {
		desc, err := c.client.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		if p := desc.GetPendingActivities(); len(p) == 1 && p[0].GetActivityType().GetName() == "SubmitPaidTask" && p[0].GetAttempt() >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the submission was not retried: %v", desc.GetPendingActivities())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := c.vendor.sim.ChargeCount(); n != 0 {
		t.Fatalf("a 5xx before acceptance charged %d times", n)
	}
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if final := c.waitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.vendor.sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2", n)
	}
}

func TestReworkChargesOnceMoreAndKeepsOldArtifact(t *testing.T) {
	c := newCluster(t)
	ep := c.allocate("auto-paid", monday())
	c.waitEpisode("auto-paid", ep)
	before := c.paidTasks("auto-paid", ep)
	if _, err := c.send("auto-paid", ep, workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video", Reason: "wrong colours"}); err != nil {
		t.Fatal(err)
	}
	final := c.waitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted || final.Steps[0].Revision != 1 {
		t.Fatalf("after rework: %+v", final)
	}
	if n := c.vendor.sim.ChargeCount(); n != 3 {
		t.Fatalf("vendor charged %d times, want 3 (2 + one rework)", n)
	}
	after := c.paidTasks("auto-paid", ep)
	if len(after) != 3 {
		t.Fatalf("paid tasks after rework: %+v", after)
	}
	var old, next ledger.PaidTask
	for _, task := range after {
		if task.Step == "video" && task.Revision == 0 {
			old = task
		}
		if task.Step == "video" && task.Revision == 1 {
			next = task
		}
	}
	if old.Artifact == "" || old.Artifact == next.Artifact || old.IdempotencyKey == next.IdempotencyKey || old.RemoteRef != before[0].RemoteRef && old.RemoteRef != before[1].RemoteRef {
		t.Fatalf("old %+v, new %+v", old, next)
	}
	for _, path := range []string{old.Artifact, next.Artifact} {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("artifact %s: %v", path, err)
		}
	}
	manifest, _ := os.ReadFile(c.dir + "/artifacts/auto-paid/" + ep + "/manifest.json")
	if !strings.Contains(string(manifest), next.SHA256) || strings.Contains(string(manifest), old.SHA256) {
		t.Fatalf("the reassembled manifest should list revision 1 only: %s", manifest)
	}
	// Reassembly is free.
	if _, err := c.send("auto-paid", ep, workflows.ReassembleUpdate, workflows.DecisionRequest{Reason: "new template"}); err != nil {
		t.Fatal(err)
	}
	c.waitEpisode("auto-paid", ep)
	if n := c.vendor.sim.ChargeCount(); n != 3 {
		t.Fatalf("reassemble charged: %d charges", n)
	}
	c.mustCheck()
}

func TestCommandsOnMissingEpisodeSpendNothing(t *testing.T) {
	c := newCluster(t)
	c.allocate("auto-paid", monday()) // a real episode exists; the command names another
	c.waitEpisode("auto-paid", "2026-W32-0")
	reads, builds := c.vendor.reads.Load(), c.vendor.builds.Load()

	_, err := c.send("auto-paid", "2026-W32-7", workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video"})
	if appErrType(err) != allot.EpisodeNotFound {
		t.Fatalf("rework of a missing episode: %v, want %s", err, allot.EpisodeNotFound)
	}
	if _, err := c.client.DescribeWorkflowExecution(context.Background(), workflows.EpisodeWorkflowID("auto-paid", "2026-W32-7"), ""); err == nil {
		t.Fatal("a workflow was started for a missing episode")
	}
	// Without the ledger pre-check the workflow itself refuses, before any
	// credential is read.
	noPrecheck := *c.commands
	noPrecheck.Ledger = nil
	_, err = noPrecheck.Send(c.ctx(), operator.CommandInput{Pipeline: "auto-paid", EpisodeID: "2026-W32-8", Update: workflows.ResolveUpdate,
		Request: workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: "vt_00000000000000000000000000000000"}})
	if appErrType(err) != allot.EpisodeNotFound {
		t.Fatalf("resolve on a missing episode without precheck: %v, want %s", err, allot.EpisodeNotFound)
	}
	// And the unknown step is refused before anything is sent.
	if _, err := c.send("auto-paid", "2026-W32-0", workflows.ReworkUpdate, workflows.DecisionRequest{Step: "assemble"}); appErrType(err) != allot.StepNotFound {
		t.Fatalf("rework of a local step: %v, want %s", err, allot.StepNotFound)
	}
	if c.vendor.reads.Load() != reads || c.vendor.builds.Load() != builds {
		t.Fatalf("credentials read %d->%d, clients built %d->%d for commands on missing episodes", reads, c.vendor.reads.Load(), builds, c.vendor.builds.Load())
	}
	if n := c.vendor.sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want the 2 of the real episode", n)
	}
}

func TestResultHashMismatchNeedsAttentionAndOverwritesNothing(t *testing.T) {
	c := newCluster(t)
	c.vendor.corrupt.Store(true)
	ep := c.allocate("auto-paid", monday())
	st := c.waitStage("auto-paid", ep, allot.StageNeedsAttention)
	if st.Attention.ErrorType != allot.ResultHashMismatch || st.Attention.Step != "video" {
		t.Fatalf("attention %+v", st.Attention)
	}
	if _, err := os.Stat(c.dir + "/artifacts/auto-paid/" + ep + "/video-r0.bin"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a result that failed its hash was written: %v", err)
	}
	c.vendor.corrupt.Store(false)
	if _, err := c.send("auto-paid", ep, workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video", Reason: "corrupt download"}); err != nil {
		t.Fatal(err)
	}
	if final := c.waitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted || final.Steps[0].Revision != 1 {
		t.Fatalf("final %+v", final)
	}
}

func TestVendorKeyNeverInHistoriesOrLogs(t *testing.T) {
	c := newCluster(t)
	if err := c.vendor.sim.SetFaults(paidvendor.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.allocate("auto-paid", monday())
	c.waitStage("auto-paid", ep, allot.StageNeedsAttention)
	_ = c.vendor.sim.SetFaults(paidvendor.SimFaults{})
	if _, err := c.send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: c.vendor.sim.Charges()[0].TaskID}); err != nil {
		t.Fatal(err)
	}
	c.waitEpisode("auto-paid", ep)
	if c.vendor.reads.Load() == 0 {
		t.Fatal("the paid activities never read the key: this test would prove nothing")
	}
	resp, err := c.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.namespace})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetExecutions()) < 2 {
		t.Fatalf("expected ScheduledRun and Episode histories, got %d", len(resp.GetExecutions()))
	}
	for _, e := range resp.GetExecutions() {
		iter := c.client.GetWorkflowHistory(context.Background(), e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events := 0
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if strings.Contains(ev.String(), vendorKey) {
				t.Fatalf("the vendor key is in event %d (%s) of %s", ev.GetEventId(), ev.GetEventType(), e.GetExecution().GetWorkflowId())
			}
		}
		if events == 0 {
			t.Fatalf("no history for %s", e.GetExecution().GetWorkflowId())
		}
	}
	logs := c.logs.String()
	if !strings.Contains(logs, "paid task accepted") && !strings.Contains(logs, "paid result stored") {
		t.Fatalf("the worker logged nothing about paid work; the log check would prove nothing:\n%s", logs)
	}
	if strings.Contains(logs, vendorKey) {
		t.Fatal("the vendor key is in the worker's logs")
	}
}

func noLookupLostResponses() paidvendor.SimFaults {
	return paidvendor.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}
}

func noFaults() paidvendor.SimFaults { return paidvendor.SimFaults{} }
