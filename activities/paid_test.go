package activities

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
)

const testVendorKey = "sk-activities-test-key"

type countingCredentials struct{ reads atomic.Int32 }

func (c *countingCredentials) VendorAPIKey(context.Context) (string, error) {
	c.reads.Add(1)
	return testVendorKey, nil
}

// withVendor gives the fixture a simulated vendor over HTTP and counters for
// credential reads and client builds.
func withVendor(t *testing.T, f *fixture) (*paidvendortest.Simulator, *countingCredentials, *atomic.Int32) {
	t.Helper()
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: testVendorKey, Seed: 1})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	creds := &countingCredentials{}
	builds := &atomic.Int32{}
	build := paidvendor.HTTPClientFactory(srv.URL)
	f.acts.Credentials = creds
	f.acts.NewVendor = func(key string) (paidvendor.Client, error) {
		builds.Add(1)
		return build(key)
	}
	return sim, creds, builds
}

func TestPaidActivitiesOnMissingEpisodeReadNoCredentials(t *testing.T) {
	f := newFixture(t, nil)
	_, creds, builds := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "real-run", tokyoNominal) // an episode exists, just not the one asked for

	missing := PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-5", Step: "video"}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, missing)
	wantAppError(t, err, allot.EpisodeNotFound)
	_, err = execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, missing)
	wantAppError(t, err, allot.EpisodeNotFound)
	for _, action := range []allot.Action{allot.ActionAdopt, allot.ActionRework, allot.ActionResubmit, allot.ActionAbandon, allot.ActionApprove} {
		_, err = execute[DecisionResult](t, f, f.acts.ApplyDecision, DecisionInput{
			RequestID: "r-" + string(action), Pipeline: "tokyo", EpisodeID: "2026-08-07-5", Action: action,
			Step: "video", RemoteRef: "vt_00000000000000000000000000000000", Reason: "x",
		})
		wantAppError(t, err, allot.EpisodeNotFound)
	}
	if creds.reads.Load() != 0 || builds.Load() != 0 {
		t.Fatalf("credentials read %d times, clients built %d times for a missing episode", creds.reads.Load(), builds.Load())
	}
	if tasks, err := f.led.PaidTasks(f.ctx, "tokyo", tokyoEpisode); err != nil || len(tasks) != 0 {
		t.Fatalf("paid tasks written: %+v, %v", tasks, err)
	}
}

func TestSubmitTwiceChargesAndCostsOnce(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	in := PaidTaskInput{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: "video"}
	first, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, in)
	if err != nil {
		t.Fatal(err)
	}
	if first.RemoteRef == "" || again.RemoteRef != first.RemoteRef || again.CostAmount != first.CostAmount {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	if sim.ChargeCount() != 1 {
		t.Fatalf("vendor charged %d times", sim.ChargeCount())
	}
	costs, err := f.led.Costs(f.ctx, "tokyo", "")
	if err != nil || len(costs) != 1 || costs[0].Amount != first.CostAmount {
		t.Fatalf("cost entries %+v, %v", costs, err)
	}
	if first.IdempotencyKey != allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0) {
		t.Fatalf("idempotency key %s is not the (episode, step, revision) key", first.IdempotencyKey)
	}
}

func TestPaidActivitiesRejectUnknownOrUnpaidSteps(t *testing.T) {
	f := newFixture(t, nil)
	_, creds, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	for _, step := range []string{"render", "plan"} {
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: step})
		wantAppError(t, err, allot.StepNotFound)
	}
	_, err := execute[DecisionResult](t, f, f.acts.ApplyDecision, DecisionInput{RequestID: "r1", Pipeline: "tokyo", EpisodeID: tokyoEpisode, Action: allot.ActionRework, Step: "plan"})
	wantAppError(t, err, allot.StepNotFound)
	if creds.reads.Load() != 0 {
		t.Fatal("credentials read for a step that is not paid")
	}
}

func TestAdoptRefusesReferencesThatAreNotThisTasks(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	f.mustAllocate(t, "tokyo", "run-2", tokyoNominal)
	// Episode 1's video is accepted; episode 0's is an unknown outcome.
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"}); err != nil {
		t.Fatal(err)
	}
	other := sim.Charges()[0].TaskID
	if err := sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	in := PaidTaskInput{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: "video"}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, in)
	if err == nil {
		t.Fatal("a lost response was reported as success")
	}
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, in)
	wantAppError(t, err, allot.OutcomeUnknown)
	for _, ref := range []string{"", "../etc/passwd", "vt_ffffffffffffffffffffffffffffffff", other} {
		_, err := execute[DecisionResult](t, f, f.acts.ApplyDecision, DecisionInput{RequestID: "adopt-" + ref, Pipeline: "tokyo", EpisodeID: tokyoEpisode, Action: allot.ActionAdopt, Step: "video", RemoteRef: ref})
		wantAppError(t, err, allot.InvalidRemoteRef)
	}
	task, err := f.led.LatestPaidTask(f.ctx, "tokyo", tokyoEpisode, "video")
	if err != nil || task.RemoteRef != "" || task.State != "intent" {
		t.Fatalf("a refused adoption changed the task: %+v, %v", task, err)
	}
	if sim.ChargeCount() != 2 {
		t.Fatalf("charges %d, want 2", sim.ChargeCount())
	}
}
