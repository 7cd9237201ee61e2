package app_test

import (
	"testing"

	"allot"
	"allot/internal/allottest"
	"allot/operator"
	"allot/pipeline"
	"allot/workflows"
)

// Issue 24 §1: a step waiting for a vendor that never comes back has an
// exit. With the vendor paused for good, the operator's resolve --abandon
// (what `starter episode resolve --abandon` sends) ends each waiting step
// with its reason, and the episode completes without the vendor ever being
// asked. Before, it answered "wait until it finishes or parks".
func TestAbandonEndsTheWaitForAVendorThatNeverComesBack(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	if _, err := operator.PauseVendor(ctx, c.Ledger, c.Pipelines, operator.VendorPauseInput{Name: pipeline.DefaultVendor, Reason: "gone for good", By: "oncall"}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	for _, step := range []string{"video", "cover"} {
		for {
			st := c.WaitStage("auto-paid", ep, allot.StageWaitingVendor)
			if st.Waiting != nil && st.Waiting.Step == step {
				break
			}
		}
		if _, err := c.Send("auto-paid", ep, workflows.ResolveUpdate, workflows.DecisionRequest{Step: step, Resolve: allot.ActionAbandon, Reason: "the vendor is gone"}); err != nil {
			t.Fatalf("resolve --abandon of waiting step %s: %v", step, err)
		}
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("after the abandons: %+v", final)
	}
	for _, step := range []string{"video", "cover"} {
		task, err := c.Ledger.LatestPaidTask(ctx, "auto-paid", ep, step)
		if err != nil || task.State != allot.PaidAbandoned || task.Error != "the vendor is gone" {
			t.Fatalf("step %s in the ledger: %+v, %v", step, task, err)
		}
	}
	if st := c.Vendor.Sim.Stats(); st.Requests != 0 {
		t.Fatalf("the paused vendor got %d requests", st.Requests)
	}
	c.MustCheck()
}
