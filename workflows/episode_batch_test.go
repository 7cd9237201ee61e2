package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
)

// The Episode's side of a batch step, with the activities mocked: it
// waits (waiting_batch, the batch in its state) on the collector's signal,
// holding no activity, and parks with the vendor's reason when its item
// was refused.

func batchPending(name string) activities.StepState {
	return activities.StepState{Name: name, Kind: "paid", Action: name, Status: allot.StepPending, Run: &activities.StepRun{Batch: true}}
}

var scoreRef = ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: "2026-W32-1", Step: "score"}

func TestEpisodeWaitsForItsBatchThenCompletes(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(batchPending("score"), pending("publish")), nil)
	calls := 0
	env.OnActivity(a.SubmitBatchItem, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PaidTaskInput) (activities.BatchItemResult, error) {
			calls++
			switch calls {
			case 1:
				return activities.BatchItemResult{Task: activities.PaidTaskResult{Step: "score", State: allot.PaidIntent}, Waiting: true, Reason: allot.ReasonBatchQueued}, nil
			case 2:
				return activities.BatchItemResult{Task: activities.PaidTaskResult{Step: "score", State: allot.PaidIntent}, Waiting: true, Reason: allot.ReasonBatchRunning,
					Batch: &activities.BatchView{Key: "b1", State: allot.BatchCreated, VendorBatchID: "vb_1", Status: "in_progress", Items: 40}}, nil
			}
			return activities.BatchItemResult{Task: activities.PaidTaskResult{Step: "score", Kind: allot.KindPaid, State: allot.PaidSucceeded, RemoteRef: "vt_1", SHA256: "ab", CostAmount: 126, CostCurrency: "USD"}}, nil
		})
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "publish", Kind: "local", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)

	var queued, running EpisodeState
	query := func(into *EpisodeState) {
		v, err := env.QueryWorkflow(StateQuery)
		if err != nil || v.Get(into) != nil {
			t.Errorf("query: %v", err)
		}
	}
	// The recheck (an hour) finds the batch running; the collector's word
	// (a signal) ends the wait.
	env.RegisterDelayedCallback(func() { query(&queued) }, 30*time.Minute)
	env.RegisterDelayedCallback(func() { query(&running) }, 90*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(BatchItemDoneSignal, BatchItemDone{Ref: ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: "2026-W32-1", Step: "score", Revision: 1}, BatchKey: "old"})
		env.SignalWorkflow(BatchItemDoneSignal, BatchItemDone{Ref: scoreRef, BatchKey: "b1", VendorBatchID: "vb_1", Outcome: allot.BatchItemSucceeded})
	}, 100*time.Minute)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if queued.Stage != allot.StageWaitingBatch || queued.Batch == nil || queued.Batch.Reason != allot.ReasonBatchQueued || queued.Steps[0].TaskState != allot.PaidIntent {
		t.Fatalf("state while queued: %+v", queued)
	}
	if running.Stage != allot.StageWaitingBatch || running.Batch == nil || running.Batch.VendorBatchID != "vb_1" || running.Batch.Items != 40 ||
		!running.Batch.Since.Equal(queued.Batch.Since) {
		t.Fatalf("state while its batch runs: %+v (queued since %v)", running.Batch, queued.Batch.Since)
	}
	if calls != 3 {
		t.Fatalf("SubmitBatchItem ran %d times, want 3 (queue, recheck, the word)", calls)
	}
	if res.Stage != allot.StageCompleted || res.Batch != nil || res.Steps[0].CostAmount != 126 || res.Steps[0].Status != allot.StepCompleted {
		t.Fatalf("result %+v", res)
	}
}

func TestEpisodeParksWhenTheVendorRefusedItsBatchItem(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(batchPending("score"), pending("publish")), nil)
	env.OnActivity(a.SubmitBatchItem, mock.Anything, mock.Anything).Return(
		activities.BatchItemResult{Task: activities.PaidTaskResult{Step: "score", State: allot.PaidIntent}, Waiting: true, Reason: allot.ReasonBatchQueued}, nil)
	var refused activities.RefuseBatchItemInput
	env.OnActivity(a.RefuseBatchItem, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RefuseBatchItemInput) error {
			refused = in
			return temporal.NewApplicationErrorWithOptions("the vendor refused every batch that carried step score: "+in.Reason, allot.VendorRejected,
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{activities.ParkDetails{TaskState: allot.PaidPlanned}}})
		})
	var parked EpisodeState
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(BatchItemDoneSignal, BatchItemDone{Ref: scoreRef, BatchKey: "b2", Outcome: allot.BatchItemNotProcessed, Refused: "model not available for batch"})
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(StateQuery)
		if err != nil || v.Get(&parked) != nil {
			t.Errorf("query: %v", err)
		}
		env.CancelWorkflow()
	}, 20*time.Minute)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	if refused.Reason != "model not available for batch" || refused.Step != "score" {
		t.Fatalf("RefuseBatchItem got %+v", refused)
	}
	if parked.Stage != allot.StageNeedsAttention || parked.Attention == nil || parked.Attention.ErrorType != allot.VendorRejected ||
		!strings.Contains(parked.Attention.Reason, "model not available") || len(parked.Attention.Remedies) == 0 || parked.Batch != nil {
		t.Fatalf("parked state %+v", parked)
	}
}
