package e2e

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"allot"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor/paidvendortest"
	"allot/workflows"
)

// monday is 02:00 UTC on Monday 2026-08-03, in ISO week 2026-W32.
func monday() time.Time { return time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC) }

func TestPaidEpisodeWithApprovalChargesOncePerStep(t *testing.T) {
	c := allottest.NewCluster(t)
	ep := c.Allocate("weekly-paid", monday())
	st := c.WaitStage("weekly-paid", ep, allot.StageWaitingApproval)
	for _, s := range st.Steps[:2] {
		if s.Status != allot.StepCompleted || s.RemoteRef == "" || s.CostAmount != paidvendortest.DefaultPrice.Amount || s.SHA256 == "" {
			t.Fatalf("paid step before approval: %+v", s)
		}
	}
	c.WaitVisible(`AllotPipeline = "weekly-paid" AND AllotOutcome = "waiting_approval"`, 1)
	if _, err := c.Send("weekly-paid", ep, workflows.ApproveUpdate, workflows.DecisionRequest{Reason: "looks good", By: "alice"}); err != nil {
		t.Fatal(err)
	}
	final := c.WaitEpisode("weekly-paid", ep)
	if final.Stage != allot.StageCompleted || final.Steps[4].Status != allot.StepCompleted {
		t.Fatalf("final state %+v", final)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (video, cover)", n)
	}
	show, err := report.Show(context.Background(), c.Ledger, c.Client, "weekly-paid", ep)
	if err != nil {
		t.Fatal(err)
	}
	if len(show.PaidTasks) != 2 || len(show.Costs) != 2 || show.Totals["USD"] != 2*paidvendortest.DefaultPrice.Amount {
		t.Fatalf("show = %+v", show)
	}
	if len(show.Decisions) != 1 || show.Decisions[0].Action != allot.ActionApprove || show.Decisions[0].Reason != "looks good" || show.Decisions[0].By != "alice" {
		t.Fatalf("decisions = %+v", show.Decisions)
	}
	manifest, err := os.ReadFile(c.Dir + "/artifacts/weekly-paid/" + ep + "/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range show.PaidTasks {
		if !strings.Contains(string(manifest), task.SHA256) {
			t.Fatalf("manifest lacks %s's sha256: %s", task.Step, manifest)
		}
	}
	costs, err := report.Costs(context.Background(), c.Ledger, report.CostsInput{Pipeline: "weekly-paid", Period: "2026-W32"})
	if err != nil || len(costs.Lines) != 2 || costs.Totals["USD"] != 500 {
		t.Fatalf("costs = %+v, %v", costs, err)
	}
	c.MustCheck()
}

func TestLostResponseIsAdoptedByLookup(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	final := c.WaitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2: every lost response must be adopted, not resubmitted", n)
	}
	for _, task := range c.PaidTasks("auto-paid", ep) {
		if task.State != allot.PaidSucceeded || task.RemoteRef == "" {
			t.Fatalf("paid task %+v", task)
		}
	}
	c.MustCheck()
}

func TestUnknownOutcomeWithoutLookupNeedsAttentionThenAdopt(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
	if st.Attention == nil || st.Attention.Step != "video" || st.Attention.ErrorType != allot.OutcomeUnknown || !strings.Contains(st.Attention.Remedy, "starter episode lookup") || !strings.Contains(strings.Join(st.Attention.Remedies, "\n"), "--resubmit") {
		t.Fatalf("attention = %+v", st.Attention)
	}
	c.WaitVisible(`AllotPipeline = "auto-paid" AND AllotOutcome = "needs_attention"`, 1)
	// Parked: nothing is scheduled that could submit again (no pending
	// activity; it waits for an operator's update), so no second
	// submission, however long it waits.
	desc, err := c.Client.DescribeWorkflowExecution(c.Ctx(), allot.EpisodeWorkflowID("auto-paid", ep), "")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(desc.GetPendingActivities()); n != 0 {
		t.Fatalf("the parked episode has %d pending activities: %v", n, desc.GetPendingActivities())
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 1 {
		t.Fatalf("vendor charged %d times while parked, want 1", n)
	}
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// Bad references are refused and change nothing.
	for ref, want := range map[string]string{
		"not-a-vendor-ref":                    allot.InvalidRemoteRef,
		"vt_00000000000000000000000000000000": allot.InvalidRemoteRef,
	} {
		_, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: ref})
		if allottest.ErrorType(err) != want {
			t.Fatalf("adopt %q: error %v, want %s", ref, err, want)
		}
	}
	if _, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "cover", Resolve: allot.ActionResubmit}); allottest.ErrorType(err) != allot.NotReady {
		t.Fatalf("resolving a step without an unknown outcome: %v, want %s", err, allot.NotReady)
	}
	ref := c.Vendor.Sim.Charges()[0].TaskID
	res, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: ref, Reason: "found in the vendor console"})
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Steps[0].RemoteRef != ref {
		t.Fatalf("after adopt: %+v", res.State.Steps[0])
	}
	final := c.WaitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (one per step)", n)
	}
	decisions, err := c.Ledger.Decisions(context.Background(), "auto-paid", ep)
	if err != nil || len(decisions) < 2 || decisions[0].Action != allot.ActionAdopt || decisions[0].Reason != "found in the vendor console" {
		t.Fatalf("decisions = %+v, %v", decisions, err)
	}
	c.MustCheck()
}

func TestVendorIgnoringIdempotencyWithFaultsNeverChargesTwice(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{IgnoreIdempotency: true, LoseResponseAfterAccept: 0.4, FailBeforeAccept: 0.4}); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for i := range 3 {
		eps = append(eps, c.Allocate("auto-paid", monday().Add(time.Duration(i)*time.Hour)))
	}
	for _, ep := range eps {
		if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s: %+v", ep, final)
		}
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
	if n := c.Vendor.Sim.ChargeCount(); n != 6 {
		t.Fatalf("vendor charged %d times, want 6 (3 episodes x 2 paid steps)", n)
	}
	c.MustCheck()
}

func TestServerErrorBeforeAcceptIsRetriedWithOneCharge(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{FailBeforeAccept: 1}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	// Wait until the submission has failed at least twice.
	id := allot.EpisodeWorkflowID("auto-paid", ep)
	deadline := allottest.Deadline(t, 30*time.Second)
	for {
		desc, err := c.Client.DescribeWorkflowExecution(context.Background(), id, "")
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
	if n := c.Vendor.Sim.ChargeCount(); n != 0 {
		t.Fatalf("a 5xx before acceptance charged %d times", n)
	}
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2", n)
	}
}

func TestReworkChargesOnceMoreAndKeepsOldArtifact(t *testing.T) {
	c := allottest.NewCluster(t)
	ep := c.Allocate("auto-paid", monday())
	c.WaitEpisode("auto-paid", ep)
	before := c.PaidTasks("auto-paid", ep)
	if _, err := c.Send("auto-paid", ep, workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video", Reason: "wrong colours"}); err != nil {
		t.Fatal(err)
	}
	final := c.WaitEpisode("auto-paid", ep)
	if final.Stage != allot.StageCompleted || final.Steps[0].Revision != 1 {
		t.Fatalf("after rework: %+v", final)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 3 {
		t.Fatalf("vendor charged %d times, want 3 (2 + one rework)", n)
	}
	after := c.PaidTasks("auto-paid", ep)
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
	manifest, _ := os.ReadFile(c.Dir + "/artifacts/auto-paid/" + ep + "/manifest.json")
	if !strings.Contains(string(manifest), next.SHA256) || strings.Contains(string(manifest), old.SHA256) {
		t.Fatalf("the reassembled manifest should list revision 1 only: %s", manifest)
	}
	// Reassembly is free.
	if _, err := c.Send("auto-paid", ep, workflows.ReassembleUpdate, workflows.DecisionRequest{Reason: "new template"}); err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("auto-paid", ep)
	if n := c.Vendor.Sim.ChargeCount(); n != 3 {
		t.Fatalf("reassemble charged: %d charges", n)
	}
	c.MustCheck()
}

func TestCommandsOnMissingEpisodeSpendNothing(t *testing.T) {
	c := allottest.NewCluster(t)
	c.Allocate("auto-paid", monday()) // a real episode exists; the command names another
	c.WaitEpisode("auto-paid", "2026-W32-0")
	reads, builds := c.Vendor.CredentialReads(), c.Vendor.ClientsBuilt()

	_, err := c.Send("auto-paid", "2026-W32-7", workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video"})
	if allottest.ErrorType(err) != allot.EpisodeNotFound {
		t.Fatalf("rework of a missing episode: %v, want %s", err, allot.EpisodeNotFound)
	}
	if _, err := c.Client.DescribeWorkflowExecution(context.Background(), allot.EpisodeWorkflowID("auto-paid", "2026-W32-7"), ""); err == nil {
		t.Fatal("a workflow was started for a missing episode")
	}
	// Without the ledger pre-check the workflow itself refuses, before any
	// credential is read.
	noPrecheck := *c.Commands
	noPrecheck.Ledger = nil
	_, err = noPrecheck.Send(c.Ctx(), operator.CommandInput{Pipeline: "auto-paid", EpisodeID: "2026-W32-8", Update: workflows.ResolveUpdate,
		Request: workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: "vt_00000000000000000000000000000000"}})
	if allottest.ErrorType(err) != allot.EpisodeNotFound {
		t.Fatalf("resolve on a missing episode without precheck: %v, want %s", err, allot.EpisodeNotFound)
	}
	// And the unknown step is refused before anything is sent.
	if _, err := c.Send("auto-paid", "2026-W32-0", workflows.ReworkUpdate, workflows.DecisionRequest{Step: "assemble"}); allottest.ErrorType(err) != allot.StepNotFound {
		t.Fatalf("rework of a local step: %v, want %s", err, allot.StepNotFound)
	}
	if c.Vendor.CredentialReads() != reads || c.Vendor.ClientsBuilt() != builds {
		t.Fatalf("credentials read %d->%d, clients built %d->%d for commands on missing episodes", reads, c.Vendor.CredentialReads(), builds, c.Vendor.ClientsBuilt())
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want the 2 of the real episode", n)
	}
}

func TestResultHashMismatchNeedsAttentionAndOverwritesNothing(t *testing.T) {
	c := allottest.NewCluster(t)
	c.Vendor.CorruptResults(true)
	ep := c.Allocate("auto-paid", monday())
	st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
	if st.Attention.ErrorType != allot.ResultHashMismatch || st.Attention.Step != "video" {
		t.Fatalf("attention %+v", st.Attention)
	}
	if _, err := os.Stat(c.Dir + "/artifacts/auto-paid/" + ep + "/video-r0.bin"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a result that failed its hash was written: %v", err)
	}
	c.Vendor.CorruptResults(false)
	if _, err := c.Send("auto-paid", ep, workflows.ReworkUpdate, workflows.DecisionRequest{Step: "video", Reason: "corrupt download"}); err != nil {
		t.Fatal(err)
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted || final.Steps[0].Revision != 1 {
		t.Fatalf("final %+v", final)
	}
}

func TestVendorKeyNeverInHistoriesOrLogs(t *testing.T) {
	c := allottest.NewCluster(t)
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
	_ = c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{})
	if _, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: c.Vendor.Sim.Charges()[0].TaskID}); err != nil {
		t.Fatal(err)
	}
	c.WaitEpisode("auto-paid", ep)
	if c.Vendor.CredentialReads() == 0 {
		t.Fatal("the paid activities never read the key: this test would prove nothing")
	}
	resp, err := c.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: c.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetExecutions()) < 2 {
		t.Fatalf("expected ScheduledRun and Episode histories, got %d", len(resp.GetExecutions()))
	}
	for _, e := range resp.GetExecutions() {
		iter := c.Client.GetWorkflowHistory(context.Background(), e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events := 0
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if strings.Contains(ev.String(), allottest.VendorKey) {
				t.Fatalf("the vendor key is in event %d (%s) of %s", ev.GetEventId(), ev.GetEventType(), e.GetExecution().GetWorkflowId())
			}
		}
		if events == 0 {
			t.Fatalf("no history for %s", e.GetExecution().GetWorkflowId())
		}
	}
	logs := c.Logs.String()
	if !strings.Contains(logs, "paid task accepted") && !strings.Contains(logs, "paid result stored") {
		t.Fatalf("the worker logged nothing about paid work; the log check would prove nothing:\n%s", logs)
	}
	if strings.Contains(logs, allottest.VendorKey) {
		t.Fatal("the vendor key is in the worker's logs")
	}
}
