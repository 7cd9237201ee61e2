package activities

// The batch activities (docs/design.md, "Batches"): open a batch over
// paid tasks that wait for one, create it at the vendor as an intent of
// its own, and once it has ended settle each item once under its task.
// Each is short: a batch that runs for hours is waited on by its workflow
// with timers between polls, holding no worker slot.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/artifacts"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// BatchItemInput is one paid task a batch carries and what is sent for it.
type BatchItemInput struct {
	Ref    ledger.PaidTaskRef `json:"ref"`
	Params map[string]string  `json:"params,omitempty"`
}

// OpenBatchInput names a new batch and the queued paid tasks it takes.
type OpenBatchInput struct {
	LedgerID string               `json:"ledger_id,omitempty"`
	Key      string               `json:"key"`
	Vendor   string               `json:"vendor"`
	Kind     string               `json:"kind"`
	Items    []ledger.PaidTaskRef `json:"items"`
}

// BatchView is a batch as a workflow needs it: small, whatever its size.
type BatchView struct {
	Key           string           `json:"key"`
	State         allot.BatchState `json:"state"`
	VendorBatchID string           `json:"vendor_batch_id,omitempty"`
	Status        string           `json:"status,omitempty"`
	// LookOnlyUntil: until then the create is only looked up; the
	// workflow waits for it before it asks CreateBatch again.
	LookOnlyUntil time.Time `json:"look_only_until,omitzero"`
	Items         int       `json:"items"`
	Settled       int       `json:"settled"`
	Error         string    `json:"error,omitempty"`
}

func viewOf(b ledger.PaidBatch) BatchView {
	return BatchView{Key: b.Key, State: b.State, VendorBatchID: b.VendorBatchID, Status: b.Status, LookOnlyUntil: b.LookOnlyUntil,
		Items: len(b.Items), Settled: b.Settled(), Error: b.Error}
}

// OpenBatchResult is the batch as opened, and the tasks it did not take.
// Batch.State is empty when no batch was opened because every task is
// settled already (an operator abandoned it from outside, say): nothing
// is left to send for them, so there is nothing to retry either.
type OpenBatchResult struct {
	Batch BatchView          `json:"batch"`
	Skips []ledger.BatchSkip `json:"skips,omitempty"`
}

// OpenBatch writes the batch's key and hands it the queued tasks, before
// anything is sent (ledger.OpenBatch).
func (a *Activities) OpenBatch(ctx context.Context, in OpenBatchInput) (OpenBatchResult, error) {
	defer heartbeating(ctx)()
	if err := a.checkLedger(in.LedgerID); err != nil {
		return OpenBatchResult{}, err
	}
	b, skips, err := a.Ledger.OpenBatch(ctx, ledger.OpenBatchInput{Key: in.Key, Vendor: in.Vendor, Kind: in.Kind, Items: in.Items})
	if errors.Is(err, ledger.ErrNothingToBatch) {
		settled, serr := a.allSettled(ctx, skips)
		if serr != nil {
			return OpenBatchResult{}, serr
		}
		if settled {
			// Items a batch gave back (not processed, or left out of
			// its create) whose tasks were given up since: let them go.
			activity.GetLogger(ctx).Info("no batch opened: every item's task is settled already", "batch_key", in.Key, "items", len(skips))
			return OpenBatchResult{Batch: BatchView{Key: in.Key}, Skips: skips}, nil
		}
		return OpenBatchResult{Skips: skips}, nonRetryable(allot.InvalidInput, "%v", err)
	}
	if err != nil {
		return OpenBatchResult{}, classify(err)
	}
	return OpenBatchResult{Batch: viewOf(b), Skips: skips}, nil
}

// allSettled reports whether every skipped task is settled (succeeded,
// failed or abandoned: states no batch moves on).
func (a *Activities) allSettled(ctx context.Context, skips []ledger.BatchSkip) (bool, error) {
	for _, s := range skips {
		t, err := a.Ledger.PaidTask(ctx, s.Ref)
		if errors.Is(err, ledger.ErrPaidTaskNotFound) {
			return false, nil
		}
		if err != nil {
			return false, classify(err)
		}
		switch t.State {
		case allot.PaidSucceeded, allot.PaidFailed, allot.PaidAbandoned:
		default:
			return false, nil
		}
	}
	return len(skips) > 0, nil
}

// CreateBatchInput asks for the opened batch to be created at the vendor.
type CreateBatchInput struct {
	LedgerID string           `json:"ledger_id,omitempty"`
	Key      string           `json:"key"`
	Vendor   string           `json:"vendor"`
	Items    []BatchItemInput `json:"items"`
	// Window is the completion window asked of the vendor (0: its own).
	Window time.Duration `json:"window,omitempty"`
}

// CreateBatch creates the batch at the vendor, once per key:
//   - a batch created or ended already is returned as it is;
//   - inside the look-only window after an unknown outcome, the vendor's
//     list is read: found, the batch is adopted; not found, the result says
//     until when to wait;
//   - else the vendor's gate is asked (a paused vendor or an open breaker
//     creates nothing: VendorWaiting), the list is read (a batch already
//     made under the key is adopted; a list that fails has sent nothing, and
//     the activity is retried), the create is recorded as under way
//     (the batch and its items maybe-sent), and SubmitBatch looks for the
//     key before it creates, sending the items the ledger marked in that
//     transaction: an item abandoned since the batch opened is left out,
//     and a batch left with none is not created. A definite refusal puts
//     the items back in the queue; any other failure may have made the
//     batch, so only the list is read for the look-only window.
func (a *Activities) CreateBatch(ctx context.Context, in CreateBatchInput) (BatchView, error) {
	defer heartbeating(ctx)()
	if err := a.checkLedger(in.LedgerID); err != nil {
		return BatchView{}, err
	}
	b, err := a.Ledger.Batch(ctx, in.Key)
	if err != nil {
		return BatchView{}, classify(err)
	}
	if b.State != allot.BatchOpen {
		return viewOf(b), nil
	}
	client, err := a.batchClient(ctx, in.Vendor)
	if err != nil {
		return BatchView{}, err
	}
	holder := attemptToken(ctx)
	if clock().Before(b.LookOnlyUntil) {
		return a.lookForBatch(ctx, client, in.Vendor, holder, b)
	}
	params, err := batchParams(b, in)
	if err != nil {
		return BatchView{}, err
	}
	pass, err := a.enterVendor(ctx, in.Vendor, ledger.VendorSend, holder)
	if err != nil {
		return BatchView{}, err
	}
	defer pass.leave(ctx)
	// Look before anything is marked: a vendor that cannot list now has
	// been sent nothing, so the batch stays as it was and the activity is
	// retried; marked first, a vendor down for a moment would cost the
	// batch its items' maybe-sent marks and a whole look-only window.
	switch vb, err := client.FindBatch(ctx, b.Key); {
	case err == nil:
		return a.recordCreated(ctx, b.Key, vb)
	case !errors.Is(err, paidvendor.ErrNotFound):
		pass.observe(err)
		return BatchView{}, err
	}
	at := clock()
	until := at.Add(a.sendTimeout(in.Vendor))
	// The request is what the ledger marked, read in the same transaction:
	// an item abandoned since the batch was read above is not in it.
	nb, send, err := a.Ledger.BeginBatchCreateItems(ctx, b.Key, at, until, a.batchQueueCap(in.Vendor))
	if err != nil {
		switch {
		case errors.Is(err, ledger.ErrBatchLookOnly):
			return viewOf(b), nil
		case errors.Is(err, ledger.ErrBatchQueueFull):
			return BatchView{}, batchQueueFull(in.Vendor, a.batchPollEvery(in.Vendor), err)
		}
		return BatchView{}, classify(err)
	}
	if nb.State != allot.BatchOpen {
		activity.GetLogger(ctx).Info("batch not created: no item was left to send", "batch_key", b.Key, "why", nb.Error)
		return viewOf(nb), nil
	}
	req := batchRequest(nb, send, params, in.Window)
	sctx, cancel := context.WithDeadline(ctx, until)
	vb, adopted, err := client.SubmitBatch(sctx, req)
	cancel()
	pass.observe(err)
	switch {
	case err == nil:
		activity.GetLogger(ctx).Info("batch created", "batch_key", b.Key, "vendor_batch_id", vb.ID, "items", len(req.Items), "adopted", adopted)
		return a.recordCreated(ctx, b.Key, vb)
	case refused(err):
		nb, rerr := a.Ledger.RecordBatchNotCreated(ctx, b.Key, err.Error())
		if rerr != nil {
			return BatchView{}, classify(rerr)
		}
		return viewOf(nb), nil
	}
	nb, rerr := a.Ledger.RecordBatchUnknown(ctx, b.Key, clock().Add(a.batchLookOnly(in.Vendor)), err.Error())
	if rerr != nil {
		return BatchView{}, classify(rerr)
	}
	activity.GetLogger(ctx).Warn("batch create outcome unknown: only its key is looked up until the window ends", "batch_key", b.Key,
		"look_only_until", nb.LookOnlyUntil, "error", err)
	return viewOf(nb), nil
}

// lookForBatch reads the vendor's list for the batch's key: the look-only
// half of CreateBatch.
func (a *Activities) lookForBatch(ctx context.Context, client paidvendor.BatchClient, vendor, holder string, b ledger.PaidBatch) (BatchView, error) {
	pass, err := a.enterVendor(ctx, vendor, ledger.VendorPoll, holder)
	if err != nil {
		return BatchView{}, err
	}
	defer pass.leave(ctx)
	vb, err := client.FindBatch(ctx, b.Key)
	pass.observe(err)
	switch {
	case errors.Is(err, paidvendor.ErrNotFound):
		return viewOf(b), nil
	case err != nil:
		return BatchView{}, err
	}
	return a.recordCreated(ctx, b.Key, vb)
}

func (a *Activities) recordCreated(ctx context.Context, key string, vb paidvendor.Batch) (BatchView, error) {
	nb, err := a.Ledger.RecordBatchCreated(ctx, key, vb.ID, vb.Status, vb.ResultsExpireAt)
	if err != nil {
		return BatchView{}, classify(err)
	}
	return viewOf(nb), nil
}

// batchParams maps each item the batch may send to what the create names
// for it; an item without is refused before anything is marked.
func batchParams(b ledger.PaidBatch, in CreateBatchInput) (map[ledger.PaidTaskRef]map[string]string, error) {
	params := make(map[ledger.PaidTaskRef]map[string]string, len(in.Items))
	for _, it := range in.Items {
		params[it.Ref] = it.Params
	}
	for _, it := range b.Items {
		if _, ok := params[it.PaidTaskRef]; !ok && it.Outcome == "" {
			return nil, nonRetryable(allot.InvalidInput, "batch %s carries %s/%s step %s revision %d but the create names no parameters for it: pass every item of the opened batch",
				b.Key, it.Pipeline, it.EpisodeID, it.Step, it.Revision)
		}
	}
	return params, nil
}

// batchRequest builds the vendor request from the tasks the ledger marked
// for the create (BeginBatchCreateItems), each under its own idempotency
// key.
func batchRequest(b ledger.PaidBatch, send []ledger.PaidTask, params map[ledger.PaidTaskRef]map[string]string, window time.Duration) paidvendor.BatchRequest {
	req := paidvendor.BatchRequest{Key: b.Key, Window: window}
	for _, t := range send {
		req.Items = append(req.Items, paidvendor.BatchItem{Key: t.IdempotencyKey, Kind: b.Kind, Params: params[t.PaidTaskRef]})
	}
	return req
}

// PollBatchInput asks where a created batch stands.
type PollBatchInput struct {
	LedgerID string `json:"ledger_id,omitempty"`
	Key      string `json:"key"`
	Vendor   string `json:"vendor"`
}

// BatchItemDone is what became of one item once its batch ended.
type BatchItemDone struct {
	Ref     ledger.PaidTaskRef     `json:"ref"`
	Outcome allot.BatchItemOutcome `json:"outcome"`
}

// PollBatchResult is the batch as seen now; Items once it has ended.
type PollBatchResult struct {
	Batch BatchView       `json:"batch"`
	Items []BatchItemDone `json:"items,omitempty"`
}

// PollBatch asks the vendor once where the batch stands. While it runs,
// the status is recorded and the workflow waits on a timer. Once it has
// ended, every item is settled under its task, once (ledger.SettleBatchItem):
// a succeeded item's result is stored and verified and its billed cost
// recorded; a failed item fails its task; an item not processed goes back
// to the queue under its same key; an item whose result is gone parks
// maybe-sent. Then the batch ends. A retry after a crash settles only the
// items not settled yet.
func (a *Activities) PollBatch(ctx context.Context, in PollBatchInput) (PollBatchResult, error) {
	defer heartbeating(ctx)()
	if err := a.checkLedger(in.LedgerID); err != nil {
		return PollBatchResult{}, err
	}
	b, err := a.Ledger.Batch(ctx, in.Key)
	if err != nil {
		return PollBatchResult{}, classify(err)
	}
	switch b.State {
	case allot.BatchEnded, allot.BatchNotCreated:
		return doneOf(b), nil
	case allot.BatchOpen:
		return PollBatchResult{}, nonRetryable(allot.InvalidInput, "batch %s is not created at the vendor yet: create it (CreateBatch) before polling it", b.Key)
	}
	client, err := a.batchClient(ctx, in.Vendor)
	if err != nil {
		return PollBatchResult{}, err
	}
	pass, err := a.enterVendor(ctx, in.Vendor, ledger.VendorPoll, attemptToken(ctx))
	if err != nil {
		return PollBatchResult{}, err
	}
	defer pass.leave(ctx)
	vb, err := client.GetBatch(ctx, b.VendorBatchID)
	pass.observe(err)
	if err != nil {
		return PollBatchResult{}, err
	}
	if !vb.Ended() {
		nb, err := a.Ledger.RecordBatchCreated(ctx, b.Key, vb.ID, vb.Status, vb.ResultsExpireAt)
		if err != nil {
			return PollBatchResult{}, classify(err)
		}
		return PollBatchResult{Batch: viewOf(nb)}, nil
	}
	keys := make([]string, 0, len(b.Items))
	refOf := make(map[string]ledger.PaidTaskRef, len(b.Items))
	for _, it := range b.Items {
		if it.Outcome != "" {
			continue
		}
		t, err := a.Ledger.PaidTask(ctx, it.PaidTaskRef)
		if err != nil {
			return PollBatchResult{}, classify(err)
		}
		keys = append(keys, t.IdempotencyKey)
		refOf[t.IdempotencyKey] = it.PaidTaskRef
	}
	if len(keys) > 0 {
		results, err := client.BatchResults(ctx, vb, keys)
		pass.observe(err)
		if err != nil {
			return PollBatchResult{}, err
		}
		for _, r := range results {
			if err := a.settleItem(ctx, b.Key, vb.ID, refOf[r.Key], r); err != nil {
				return PollBatchResult{}, err
			}
		}
	}
	nb, err := a.Ledger.EndBatch(ctx, b.Key, vb.Status)
	if err != nil {
		return PollBatchResult{}, classify(err)
	}
	activity.GetLogger(ctx).Info("batch ended", "batch_key", b.Key, "vendor_batch_id", vb.ID, "status", vb.Status, "items", len(nb.Items))
	return doneOf(nb), nil
}

func doneOf(b ledger.PaidBatch) PollBatchResult {
	out := PollBatchResult{Batch: viewOf(b)}
	for _, it := range b.Items {
		out.Items = append(out.Items, BatchItemDone{Ref: it.PaidTaskRef, Outcome: it.Outcome})
	}
	return out
}

// settleItem records one item's outcome under its task; a succeeded item's
// result is written (temporary file, fsync, rename) and checked against the
// vendor's sha256 first.
func (a *Activities) settleItem(ctx context.Context, key, vendorBatchID string, ref ledger.PaidTaskRef, r paidvendor.ItemResult) error {
	s := ledger.BatchItemSettlement{Ref: ref, Outcome: r.Outcome, Error: r.Error}
	switch r.Outcome {
	case paidvendor.ItemSucceeded:
		path := filepath.Join(artifacts.EpisodeDir(a.ArtifactsDir, ref.Pipeline, ref.EpisodeID), fmt.Sprintf("%s-r%d.bin", ref.Step, ref.Revision))
		sum, err := artifacts.WriteVerified(path, bytes.NewReader(r.Result), r.Task.SHA256)
		if err != nil {
			return err
		}
		s.RemoteRef, s.Amount, s.Currency, s.Artifact, s.SHA256 = r.Task.ID, r.Task.Cost.Amount, r.Task.Cost.Currency, path, sum
	case paidvendor.ItemFailed:
		s.RemoteRef = r.Task.ID
		if s.RemoteRef == "" {
			s.RemoteRef = vendorBatchID + "/" + r.Key // the item's place in the vendor's batch
		}
		if s.Error == "" {
			s.Error = "the vendor reports the item failed"
		}
	}
	_, added, err := a.Ledger.SettleBatchItem(ctx, key, s)
	if err != nil {
		return classify(err)
	}
	countCost(ctx, ref.Pipeline, added, s.Currency)
	return nil
}

// batchClient builds the vendor's adapter, which must take batches.
func (a *Activities) batchClient(ctx context.Context, vendor string) (paidvendor.BatchClient, error) {
	s, err := a.vendorFor(ctx, vendor)
	if err != nil {
		return nil, err
	}
	c, ok := s.(paidvendor.BatchClient)
	if !ok {
		return nil, nonRetryable(allot.VendorNotConfigured, "vendor %q's adapter takes no batches: use the http adapter, or a Go adapter that implements paidvendor.BatchClient, or drop batch mode from the step", vendor)
	}
	return c, nil
}

// batchQueueCap is the vendor's batch_max_queued_items (0: no cap).
func (a *Activities) batchQueueCap(vendor string) int {
	if a.Pipelines == nil {
		return 0
	}
	return a.Pipelines.Batching(vendor).BatchMaxQueuedItems
}

// batchQueueFull is the retryable VendorWaiting of a create the vendor's
// batch queue has no room for: nothing was sent or marked, and the create
// is tried again when a running batch may have ended (its poll interval).
func batchQueueFull(vendor string, every time.Duration, err error) error {
	retry := min(every, time.Minute)
	w := VendorWait{Vendor: vendor, Reason: allot.ReasonVendorBatchQueue, Message: err.Error(), RetryAt: clock().Add(retry)}
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%v; nothing was sent, asking again in %s", err, retry),
		allot.VendorWaiting, temporal.ApplicationErrorOptions{NextRetryDelay: retry, Details: []any{w}, Category: waitCategory})
}

// batchLookOnly is how long, after a create whose outcome is unknown, the
// vendor's list is only read before a create may be tried again under the
// same key: the vendor's batch_list_lag, unless the worker overrides it.
func (a *Activities) batchLookOnly(vendor string) time.Duration {
	if a.BatchLookOnly > 0 {
		return a.BatchLookOnly
	}
	if a.Pipelines == nil {
		return pipeline.DefaultBatchListLag
	}
	return a.Pipelines.Batching(vendor).ListLag()
}

// BatchEnqueue is a queued item handed to its vendor's collector: the
// worker sets Activities.EnqueueBatch to SignalWithStart the collector
// (workflows.EnqueueBatchItem), so this package names no workflow.
type BatchEnqueue struct {
	LedgerID         string             `json:"ledger_id,omitempty"`
	TaskQueue        string             `json:"task_queue"`
	Vendor           string             `json:"vendor"`
	Kind             string             `json:"kind"`
	MaxItems         int                `json:"max_items"`
	MaxWait          time.Duration      `json:"max_wait"`
	PollEvery        time.Duration      `json:"poll_every,omitempty"`
	Ref              ledger.PaidTaskRef `json:"ref"`
	Params           map[string]string  `json:"params,omitempty"`
	NotifyWorkflowID string             `json:"notify_workflow_id"`
}

// BatchItemResult is a batch step's task: done (Task), or waiting for the
// batch that carries it (Waiting, with why and the batch as last seen).
type BatchItemResult struct {
	Task    PaidTaskResult `json:"task"`
	Waiting bool           `json:"waiting,omitempty"`
	// Reason is allot.ReasonBatchQueued or allot.ReasonBatchRunning.
	Reason string     `json:"reason,omitempty"`
	Batch  *BatchView `json:"batch,omitempty"`
}

// SubmitBatchItem is SubmitPaidTask for a paid step in batch mode: it
// writes the task's intent as waiting for a batch, with its budget
// reservation (a budget that refuses parks the episode as for a direct
// task), and hands it to the vendor's collector; asked again, it reads
// where the task stands. Done, it returns the task; a failed task is
// VendorTaskFailed; a task whose batch lost its result is OutcomeUnknown
// (it may have been billed: an operator settles it). It calls no vendor.
func (a *Activities) SubmitBatchItem(ctx context.Context, in PaidTaskInput) (BatchItemResult, error) {
	res, err := a.submitBatchItem(ctx, in)
	return res, a.withTaskState(ctx, in.ref(), err)
}

func (a *Activities) submitBatchItem(ctx context.Context, in PaidTaskInput) (BatchItemResult, error) {
	p, ep, st, err := a.paidStep(ctx, in)
	if err != nil {
		return BatchItemResult{}, err
	}
	if !st.Batch || st.Kind != allot.KindPaid {
		return BatchItemResult{}, nonRetryable(allot.InvalidInput, "step %s of %s is not a paid step in batch mode: it is sent by SubmitPaidTask", st.Name, p.Name)
	}
	ref := in.ref()
	key := allot.IdempotencyKey(p.Name, ep.ID, st.Name, in.Revision)
	task, err := a.Ledger.PaidTask(ctx, ref)
	if err != nil && !errors.Is(err, ledger.ErrPaidTaskNotFound) {
		return BatchItemResult{}, classify(err)
	}
	if err != nil || task.State == allot.PaidPlanned {
		if task, err = a.queueBatchItem(ctx, p, ep, st, in, ref, key); err != nil {
			return BatchItemResult{}, err
		}
	}
	switch task.State {
	case allot.PaidSucceeded, allot.PaidAbandoned:
		done, err := a.paidResult(ctx, task, allot.KindPaid)
		return BatchItemResult{Task: done}, err
	case allot.PaidFailed:
		return BatchItemResult{}, nonRetryable(allot.VendorTaskFailed, "item %s of step %s revision %d failed in its batch: %s", task.RemoteRef, st.Name, in.Revision, task.Error)
	case allot.PaidIntent:
	default:
		return BatchItemResult{}, nonRetryable(allot.InvalidInput, "paid task %s/%s step %s revision %d is %s: a batch item goes from intent to its outcome in one write", p.Name, ep.ID, st.Name, in.Revision, task.State)
	}
	waiting := BatchItemResult{Task: PaidTaskResult{Step: st.Name, Kind: allot.KindPaid, Revision: in.Revision, State: task.State, IdempotencyKey: key}, Waiting: true}
	switch {
	case task.Owner == ledger.BatchQueue && !task.MaybeSent:
		// Waiting for a batch: hand it to the collector (again: a
		// collector that ended, or lost it, takes it once).
		if err := a.enqueueBatch(ctx, p, ep, st, in, ref, key); err != nil {
			return BatchItemResult{}, err
		}
		waiting.Reason = allot.ReasonBatchQueued
		return waiting, nil
	case strings.HasPrefix(task.Owner, ledger.BatchOwner("")):
		b, err := a.Ledger.Batch(ctx, strings.TrimPrefix(task.Owner, ledger.BatchOwner("")))
		if err != nil {
			return BatchItemResult{}, classify(err)
		}
		if b.State == allot.BatchEnded {
			return BatchItemResult{}, nonRetryable(allot.BatchResultLost, "vendor batch %s (key %s) ended %s but its result files are gone and do not say what became of step %s (custom_id %s): it may have been billed, so it is not sent again; look for a charge under that custom_id on the vendor's bill (starter drift list --vendor %s), then abandon the step",
				b.VendorBatchID, b.Key, b.Status, st.Name, key, vendorOf(st))
		}
		view := viewOf(b)
		waiting.Reason, waiting.Batch = allot.ReasonBatchRunning, &view
		return waiting, nil
	case task.MaybeSent:
		return BatchItemResult{}, nonRetryable(allot.OutcomeUnknown, "step %s's task may have reached the vendor outside a batch (owner %q): settle it first", st.Name, task.Owner)
	}
	return BatchItemResult{}, nonRetryable(allot.InvalidInput, "step %s's intent is owned by %q, not a batch: it was sent directly; resolve it as a direct task", st.Name, task.Owner)
}

// queueBatchItem writes the task's intent owned by the batch queue, with
// the reservation its budgets admit, as PaidPrepare does a direct one.
func (a *Activities) queueBatchItem(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, in PaidTaskInput, ref ledger.PaidTaskRef, key string) (ledger.PaidTask, error) {
	for priced := 1; ; priced++ {
		adm, quote, err := a.admission(ctx, p, ep, st, PaidPhaseInput{PaidTaskInput: in, Owner: ledger.BatchQueue})
		if err != nil {
			return ledger.PaidTask{}, err
		}
		if quote {
			return ledger.PaidTask{}, nonRetryable(allot.InvalidInput, "step %s is priced by its vendor's quote, which a batch does not ask: give it max_cost, or remove batch = true", st.Name)
		}
		task, err := a.Ledger.WriteIntentAdmitted(ctx, ref, key, ledger.BatchQueue, adm)
		switch {
		case errors.Is(err, ledger.ErrReservationMissing) && priced < maxPricings:
			continue
		case errors.Is(err, ledger.ErrBudgetExhausted):
			return ledger.PaidTask{}, a.budgetExhausted(ctx, p, ep, st, err)
		case err != nil:
			return ledger.PaidTask{}, classify(err)
		}
		return task, nil
	}
}

// batchPollEvery is how often the vendor's collector asks about a running
// batch: its batch_poll_every, unless the worker overrides it.
func (a *Activities) batchPollEvery(vendor string) time.Duration {
	if a.BatchPollEvery > 0 {
		return a.BatchPollEvery
	}
	if a.Pipelines == nil {
		return pipeline.DefaultBatchPollEvery
	}
	return a.Pipelines.Batching(vendor).PollEvery()
}

func (a *Activities) enqueueBatch(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, in PaidTaskInput, ref ledger.PaidTaskRef, key string) error {
	if a.EnqueueBatch == nil {
		return nonRetryable(allot.VendorNotConfigured, "this worker sends no batches (it has no Temporal client to reach the collector): run the allot worker, which does")
	}
	req, err := a.sendRequest(ctx, p, ep, st, in.Revision, key)
	if err != nil {
		return err
	}
	info := activity.GetInfo(ctx)
	return a.EnqueueBatch(ctx, BatchEnqueue{
		LedgerID: in.LedgerID, TaskQueue: info.TaskQueue, Vendor: vendorOf(st), Kind: st.Action,
		MaxItems: st.BatchMaxItemsOrDefault(), MaxWait: st.BatchMaxWaitDuration(), PollEvery: a.batchPollEvery(vendorOf(st)),
		Ref: ref, Params: req.Params, NotifyWorkflowID: info.WorkflowExecution.ID,
	})
}

// RefuseBatchItemInput is a batch item the vendor refused in every batch
// that carried it, and its reason.
type RefuseBatchItemInput struct {
	PaidTaskInput
	Reason string `json:"reason"`
}

// RefuseBatchItem settles a batch item the vendor refused as a direct task
// the vendor refused is: its intent goes back to planned and its budgets
// get the reservation back (nothing was sent that was taken), and the
// error is VendorRejected with the vendor's reason, so the episode parks
// with its exits (retry once the cause is fixed, or abandon).
func (a *Activities) RefuseBatchItem(ctx context.Context, in RefuseBatchItemInput) error {
	err := a.refuseBatchItem(ctx, in)
	return a.withTaskState(ctx, in.ref(), err)
}

func (a *Activities) refuseBatchItem(ctx context.Context, in RefuseBatchItemInput) error {
	if _, _, _, err := a.paidStep(ctx, in.PaidTaskInput); err != nil {
		return err
	}
	t, err := a.Ledger.PaidTask(ctx, in.ref())
	if err != nil {
		return classify(err)
	}
	if t.State == allot.PaidIntent && t.Owner == ledger.BatchQueue && !t.MaybeSent {
		if _, err := a.Ledger.ReleaseIntent(ctx, in.ref(), ledger.BatchQueue, false); err != nil {
			return classify(err)
		}
	}
	return nonRetryable(allot.VendorRejected, "the vendor refused every batch that carried step %s: %s", in.Step, in.Reason)
}
