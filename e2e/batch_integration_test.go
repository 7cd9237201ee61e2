package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/report"
	"allot/paidvendor/paidvendortest"
)

// A paid step in batch mode on the embedded server (docs/design.md,
// "Batches"): episodes of a week queue their tasks, the vendor's collector
// sends them in one batch, each episode waits (waiting_batch) and then
// completes with its result, billed once at the batch price.

const batchPipelines = `
[[budget]]
name     = "evals"
pipeline = "evals"
period   = "iso-week"
limit    = { amount = 100000, currency = "USD" }

[[pipeline]]
name   = "evals"
period = "iso-week"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
  [[pipeline.step]]
  name            = "score"
  kind            = "paid"
  batch           = true
  batch_max_items = 3
  batch_max_wait  = "1h"
  max_cost        = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name = "publish"
  kind = "local"
`

func TestBatchStepSendsEpisodesInOneBatchBilledOnceAtHalfPrice(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(batchPipelines))
	// Two episodes wait for a batch that closes at three items.
	var eps []string
	for i := range 2 {
		eps = append(eps, c.Allocate("evals", monday().Add(time.Duration(i)*time.Hour)))
	}
	for _, ep := range eps {
		st := c.WaitStage("evals", ep, allot.StageWaitingBatch)
		if st.Batch == nil || st.Batch.Step != "score" || st.Batch.Reason != allot.ReasonBatchQueued || st.Steps[1].TaskState != allot.PaidIntent {
			t.Fatalf("episode %s waiting: %+v", ep, st)
		}
	}
	c.WaitVisible(`AllotPipeline = "evals" AND AllotOutcome = "waiting_batch"`, 2)
	if n := c.Vendor.Sim.BatchCount(); n != 0 {
		t.Fatalf("the vendor made %d batches before one was full", n)
	}
	// The third closes the batch.
	eps = append(eps, c.Allocate("evals", monday().Add(2*time.Hour)))
	for _, ep := range eps {
		final := c.WaitEpisode("evals", ep)
		if final.Stage != allot.StageCompleted || final.Batch != nil {
			t.Fatalf("episode %s: %+v", ep, final)
		}
		score := final.Steps[1]
		if score.Status != allot.StepCompleted || score.SHA256 == "" || score.CostAmount != (paidvendortest.DefaultPrice.Amount+1)/2 {
			t.Fatalf("episode %s's batch step: %+v, want completed at half of %d", ep, score, paidvendortest.DefaultPrice.Amount)
		}
	}
	if n := c.Vendor.Sim.BatchCount(); n != 1 {
		t.Errorf("the vendor made %d batches, want 1 (batch_max_items = 3)", n)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 3 {
		t.Errorf("the vendor billed %d lines, want 3", n)
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
	c.MustCheck()
	// episode show names the batch, what became of the task, and why.
	show, err := report.Show(c.Ctx(), c.Ledger, c.Client, "evals", eps[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(show.Batches) != 1 || show.Batches[0].Step != "score" || show.Batches[0].VendorBatchID == "" || show.Batches[0].Items != 3 ||
		show.Batches[0].State != allot.BatchEnded || show.Batches[0].Outcome != allot.BatchItemSucceeded || !strings.HasPrefix(show.Batches[0].Next, "done") {
		t.Errorf("episode show's batches: %+v", show.Batches)
	}
	// The collector ends once it has nothing to do.
	run := c.Client.GetWorkflow(context.Background(), allot.BatchCollectorID("default", "score"), "")
	ctx, cancel := context.WithTimeout(c.Ctx(), time.Minute)
	defer cancel()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("the collector: %v", err)
	}
}

// A batch whose output file is gone: the item may have been billed, so
// its episode parks BatchResultLost with one exit, abandon, and that
// command, run as printed, moves the episode on. Nothing is sent again.
func TestBatchItemWhoseResultIsLostParksAndItsRemedyRuns(t *testing.T) {
	toml := strings.Replace(batchPipelines, "batch_max_items = 3", "batch_max_items = 1", 1)
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{BatchOutputGone: 1}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("evals", monday())
	st := c.WaitStage("evals", ep, allot.StageNeedsAttention)
	want := allot.AbandonCommand("evals", ep, "score", "abandoned after "+allot.BatchResultLost)
	if st.Attention == nil || st.Attention.ErrorType != allot.BatchResultLost || st.Attention.TaskState != allot.PaidIntent ||
		len(st.Attention.Remedies) != 1 || st.Attention.Remedies[0] != want || !strings.Contains(st.Attention.Reason, "starter drift list --vendor default") {
		t.Fatalf("parked: %+v", st.Attention)
	}
	pipelines := filepath.Join(t.TempDir(), "pipelines.toml")
	if err := os.WriteFile(pipelines, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &starterEnv{t: t, bin: allottest.BuildBinary(t, "allot/starter"), env: cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE="+c.Namespace,
		"ALLOT_LEDGER="+c.LedgerURL, "ALLOT_PIPELINES="+pipelines,
		"ALLOT_VENDOR_URL="+c.Vendor.URL, "ALLOT_VENDOR_API_KEY="+allottest.VendorKey,
	)}
	s.run(st.Attention.Remedies[0])
	final := c.WaitEpisode("evals", ep)
	if final.Stage != allot.StageCompleted || final.Steps[1].TaskState != allot.PaidAbandoned {
		t.Fatalf("after the remedy: %+v", final)
	}
	if n, b := c.Vendor.Sim.ChargeCount(), c.Vendor.Sim.BatchCount(); n != 1 || b != 1 {
		t.Fatalf("the vendor billed %d lines in %d batches, want 1 in 1: nothing sent again", n, b)
	}
}
