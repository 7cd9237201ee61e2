package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// A paid step in batch mode (docs/design.md, "Batches"): the episode writes
// its task's intent as waiting for a batch (SubmitBatchItem, which admits
// its budgets and hands it to the vendor's BatchCollector), then waits for
// the collector's word (BatchItemDoneSignal) on a signal and a timer, no
// activity running, and reads the outcome from the ledger.

// WaitingBatch says that a paid step waits for the vendor's batch that
// carries its task (stage waiting_batch).
type WaitingBatch struct {
	Step string `json:"step"`
	// Reason is allot.ReasonBatchQueued (waiting for a batch to close) or
	// allot.ReasonBatchRunning.
	Reason        string           `json:"reason"`
	BatchKey      string           `json:"batch_key,omitempty"`
	VendorBatchID string           `json:"vendor_batch_id,omitempty"`
	State         allot.BatchState `json:"batch_state,omitempty"`
	Status        string           `json:"status,omitempty"`
	Items         int              `json:"items,omitempty"`
	Since         time.Time        `json:"since"`
}

// batchRecheck is how often a waiting episode reads where its task stands
// without word from the collector: a collector that ended or lost the item
// is handed it again.
const batchRecheck = time.Hour

func (e *episode) runPaidInBatch(ctx workflow.Context, i int) error {
	var a *activities.Activities
	step := e.state.Steps[i]
	in := activities.PaidTaskInput{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Step: step.Name, Revision: step.Revision}
	done := workflow.GetSignalChannel(ctx, BatchItemDoneSignal)
	opts := ledgerActivityOptions()
	for {
		var res activities.BatchItemResult
		err := e.call(workflow.WithActivityOptions(ctx, opts), step.Name, "SubmitBatchItem", a.SubmitBatchItem, in, &res)
		if err != nil {
			if kind := errorType(err); needsOperator(kind) {
				e.state.Batch = nil
				return e.park(ctx, i, kind, err)
			}
			return err
		}
		if !res.Waiting {
			e.state.Batch = nil
			if e.state.Stage == allot.StageWaitingBatch {
				if err := e.setStage(ctx, allot.StageRunning); err != nil {
					return err
				}
			}
			e.applyPaid(i, res.Task)
			return nil
		}
		if err := e.showBatch(ctx, i, res); err != nil {
			return err
		}
		word, ok, err := e.awaitBatchWord(ctx, done, in)
		if err != nil {
			return err
		}
		if ok && word.Refused != "" {
			err := e.call(workflow.WithActivityOptions(ctx, opts), step.Name, "RefuseBatchItem", a.RefuseBatchItem,
				activities.RefuseBatchItemInput{PaidTaskInput: in, Reason: word.Refused}, nil)
			if kind := errorType(err); err != nil && needsOperator(kind) {
				e.state.Batch = nil
				return e.park(ctx, i, kind, err)
			}
			if err != nil {
				return err
			}
		}
	}
}

// showBatch shows the wait: stage waiting_batch with its reason, the
// batch in the state query, the step's task state, the current details.
func (e *episode) showBatch(ctx workflow.Context, i int, res activities.BatchItemResult) error {
	step := &e.state.Steps[i]
	step.TaskState, step.Status = res.Task.State, res.Task.StepStatus()
	w := &WaitingBatch{Step: step.Name, Reason: res.Reason, Since: workflow.Now(ctx)}
	if e.state.Batch != nil && e.state.Batch.Step == step.Name {
		w.Since = e.state.Batch.Since
	}
	details := fmt.Sprintf("Waiting for a vendor batch: step **%s** is queued until a batch closes.", step.Name)
	if b := res.Batch; b != nil {
		w.BatchKey, w.VendorBatchID, w.State, w.Status, w.Items = b.Key, b.VendorBatchID, b.State, b.Status, b.Items
		details = fmt.Sprintf("Waiting for vendor batch `%s` (%s, %d items): step **%s**.", b.VendorBatchID, b.Status, b.Items, step.Name)
	}
	e.state.Batch = w
	workflow.SetCurrentDetails(ctx, details)
	return e.setStage(ctx, allot.StageWaitingBatch, res.Reason)
}

// awaitBatchWord waits for the collector's word on this task, or for
// batchRecheck; ok says a word came.
func (e *episode) awaitBatchWord(ctx workflow.Context, done workflow.ReceiveChannel, in activities.PaidTaskInput) (BatchItemDone, bool, error) {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, batchRecheck)
	for {
		var (
			word   BatchItemDone
			got    bool
			waitEr error
		)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(done, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &word)
			got = true
		})
		sel.AddFuture(timer, func(f workflow.Future) { waitEr = f.Get(ctx, nil) })
		sel.Select(ctx)
		switch {
		case got && word.Ref == (allot.PaidTaskRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, Step: in.Step, Revision: in.Revision}):
			return word, true, nil
		case got:
			continue // another revision's word: the ledger has it
		case waitEr != nil && !errors.Is(waitEr, workflow.ErrCanceled):
			return BatchItemDone{}, false, waitEr
		}
		return BatchItemDone{}, false, nil
	}
}

// EnqueueBatchItem hands a queued item to its vendor's collector, starting
// the collector if none runs (SignalWithStart): the worker sets
// activities.Activities.EnqueueBatch to it.
func EnqueueBatchItem(ctx context.Context, c client.Client, e activities.BatchEnqueue) error {
	id := allot.BatchCollectorID(e.Vendor, e.Kind)
	_, err := c.SignalWithStartWorkflow(ctx, id, BatchItemSignal,
		BatchItemRequest{Ref: e.Ref, Params: e.Params, NotifyWorkflowID: e.NotifyWorkflowID},
		client.StartWorkflowOptions{ID: id, TaskQueue: e.TaskQueue},
		BatchCollector, BatchCollectorInput{LedgerID: e.LedgerID, Vendor: e.Vendor, Kind: e.Kind, MaxItems: e.MaxItems, MaxWait: e.MaxWait, PollEvery: e.PollEvery})
	if err != nil {
		return fmt.Errorf("hand step %s of %s/%s to batch collector %s: %w", e.Ref.Step, e.Ref.Pipeline, e.Ref.EpisodeID, id, err)
	}
	return nil
}
