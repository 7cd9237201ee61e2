package workflows

import (
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/pipeline"
)

// The BatchCollector (docs/design.md, "Batches") gathers the paid tasks of
// one vendor and kind that wait for a batch, from any number of episodes,
// and sends them in vendor batches: a batch closes when it has MaxItems
// items or its first item has waited MaxWait. Each batch is driven in its
// own coroutine: opened in the ledger (OpenBatch), created at the vendor
// once (CreateBatch, waiting out a look-only window on a timer), then
// polled on a timer until it ends (PollBatch), when each item's episode is
// told what became of it. Between polls nothing runs: no worker slot is
// held for the hours a batch takes. Items a batch did not process come
// back to the collector and go into the next batch under their same keys.
// The ledger holds the truth; the collector's state is what to do next,
// carried across continue-as-new.

const (
	// BatchCollectorWorkflow is the collector's workflow type, under
	// allot.BatchCollectorID(vendor, kind).
	BatchCollectorWorkflow = "BatchCollector"
	// BatchItemSignal hands the collector one queued item
	// (BatchItemRequest); the enqueueing activity sends it with the
	// start (SignalWithStart).
	BatchItemSignal = "batch-item"
	// BatchItemDoneSignal tells an item's workflow what became of it
	// (BatchItemDone).
	BatchItemDoneSignal = "batch-item-done"
	// BatchCollectorStateQuery answers BatchCollectorState.
	BatchCollectorStateQuery = StateQuery
)

// Bounds of a collector's run.
const (
	// batchCollectorBatches bounds the batches one run closes before it
	// continues as new.
	batchCollectorBatches = 200
	// batchStoppedRetry is how long a batch whose driving stopped on a
	// refusal (an error its activities do not retry: a vendor taken out
	// of the pipeline file, an item changed in the ledger from outside)
	// waits before it is driven again from the ledger's state. Meanwhile
	// the collector's state query shows it, with why; once the cause is
	// mended the batch goes on by itself. Its items' episodes wait in
	// waiting_batch, their reservations held.
	batchStoppedRetry = time.Hour
)

// BatchItemRequest is one paid task queued for a batch: its intent is
// written (owned by the ledger's batch queue, its budget reserved) before
// it is sent here.
type BatchItemRequest struct {
	Ref    allot.PaidTaskRef `json:"ref"`
	Params map[string]string `json:"params,omitempty"`
	// NotifyWorkflowID is told the item's outcome (BatchItemDoneSignal);
	// "" tells no one.
	NotifyWorkflowID string `json:"notify_workflow_id,omitempty"`
	// Refused counts the batches carrying it that the vendor refused.
	Refused int `json:"refused,omitempty"`
}

// batchRefusalsBeforeParking: an item in that many refused batches is not
// batched again: a request the vendor refuses twice is refused for what
// it asks, and its episode parks with the vendor's reason.
const batchRefusalsBeforeParking = 2

// BatchItemDone is what became of one item: the signal its workflow gets.
type BatchItemDone struct {
	Ref           allot.PaidTaskRef      `json:"ref"`
	BatchKey      string                 `json:"batch_key"`
	VendorBatchID string                 `json:"vendor_batch_id,omitempty"`
	Outcome       allot.BatchItemOutcome `json:"outcome"`
	// Refused is the vendor's reason when it refused the item's batches
	// (Outcome not_processed, the item waiting in the ledger's queue).
	Refused string `json:"refused,omitempty"`
}

// InFlightBatch is a batch a collector drives: its key and items.
type InFlightBatch struct {
	Key   string             `json:"key"`
	Items []BatchItemRequest `json:"items"`
}

// BatchCollectorInput starts (or continues) the collector of one vendor
// and kind.
type BatchCollectorInput struct {
	LedgerID string        `json:"ledger_id,omitempty"`
	Vendor   string        `json:"vendor"`
	Kind     string        `json:"kind"`
	MaxItems int           `json:"max_items,omitempty"`
	MaxWait  time.Duration `json:"max_wait,omitempty"`
	// Window is the completion window asked of the vendor (0: its own).
	Window    time.Duration `json:"window,omitempty"`
	PollEvery time.Duration `json:"poll_every,omitempty"`
	// Pending and InFlight carry a continued collector's work.
	Pending  []BatchItemRequest `json:"pending,omitempty"`
	InFlight []InFlightBatch    `json:"in_flight,omitempty"`
}

// BatchCollectorState is what the state query answers.
type BatchCollectorState struct {
	Vendor  string `json:"vendor"`
	Kind    string `json:"kind"`
	Pending int    `json:"pending"`
	// Batches are the batches in flight, as last seen.
	Batches []activities.BatchView `json:"batches"`
	// Closed counts the batches this run closed.
	Closed int `json:"closed"`
	// Stopped are the batches in flight whose driving stopped on a
	// refusal, each driven again at its RetryAt.
	Stopped []StoppedBatch `json:"stopped,omitempty"`
}

// StoppedBatch is a batch whose driving stopped on a refusal: why, and
// when it is driven again from the ledger's state.
type StoppedBatch struct {
	Key     string    `json:"key"`
	Error   string    `json:"error"`
	RetryAt time.Time `json:"retry_at"`
}

type batchCollector struct {
	in      BatchCollectorInput
	pending []BatchItemRequest
	// inFlight are the batches being driven, in the order they closed (a
	// slice: workflow code never ranges over a map).
	inFlight []InFlightBatch
	views    map[string]activities.BatchView
	stopped  map[string]StoppedBatch
	closed   int
	items    workflow.ReceiveChannel
	// returned carries items a batch did not process back to the loop;
	// ended the keys of batches done.
	returned workflow.Channel
	ended    workflow.Channel
}

// BatchCollector runs until it has nothing pending or in flight, or
// continues as new when its history grows.
func BatchCollector(ctx workflow.Context, in BatchCollectorInput) error {
	c := &batchCollector{in: in}
	if err := c.setup(ctx); err != nil {
		return err
	}
	return c.run(ctx)
}

func (c *batchCollector) setup(ctx workflow.Context) error {
	if c.in.MaxItems <= 0 {
		c.in.MaxItems = pipeline.DefaultBatchMaxItems
	}
	if c.in.MaxWait <= 0 {
		c.in.MaxWait = pipeline.DefaultBatchMaxWait
	}
	if c.in.PollEvery <= 0 {
		c.in.PollEvery = pipeline.DefaultBatchPollEvery
	}
	c.pending = slices.Clone(c.in.Pending)
	c.views = map[string]activities.BatchView{}
	c.stopped = map[string]StoppedBatch{}
	c.items = workflow.GetSignalChannel(ctx, BatchItemSignal)
	c.returned = workflow.NewChannel(ctx)
	c.ended = workflow.NewChannel(ctx)
	return workflow.SetQueryHandler(ctx, BatchCollectorStateQuery, func() (BatchCollectorState, error) {
		s := BatchCollectorState{Vendor: c.in.Vendor, Kind: c.in.Kind, Pending: len(c.pending), Closed: c.closed}
		for _, b := range c.inFlight {
			s.Batches = append(s.Batches, c.views[b.Key])
			if st, ok := c.stopped[b.Key]; ok {
				s.Stopped = append(s.Stopped, st)
			}
		}
		return s, nil
	})
}

func (c *batchCollector) run(ctx workflow.Context) error {
	for _, b := range c.in.InFlight {
		c.drive(ctx, b)
	}
	var (
		timer      workflow.Future
		cancelWait workflow.CancelFunc
	)
	for {
		// Items signalled since the last look (the first one comes with
		// the start, SignalWithStart) count before anything is decided.
		c.drainItems(ctx) // before the checks below
		if len(c.pending) >= c.in.MaxItems || timer != nil && timer.IsReady() {
			if cancelWait != nil {
				cancelWait()
			}
			timer, cancelWait = nil, nil
			c.closeBatch(ctx)
			continue
		}
		if len(c.pending) > 0 && timer == nil {
			var tctx workflow.Context
			tctx, cancelWait = workflow.WithCancel(ctx)
			timer = workflow.NewTimer(tctx, c.in.MaxWait)
		}
		if len(c.pending) == 0 && len(c.inFlight) == 0 {
			return nil // nothing to do: the next item starts a new run
		}
		if c.closed >= batchCollectorBatches || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return c.continueAsNew(ctx)
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(c.items, func(ch workflow.ReceiveChannel, _ bool) {
			var it BatchItemRequest
			ch.Receive(ctx, &it)
			c.add(it)
		})
		sel.AddReceive(c.returned, func(ch workflow.ReceiveChannel, _ bool) {
			var it BatchItemRequest
			ch.Receive(ctx, &it)
			// Its batch is still in flight until it says it ended.
			if !slices.ContainsFunc(c.pending, func(p BatchItemRequest) bool { return p.Ref == it.Ref }) {
				c.pending = append(c.pending, it)
			}
		})
		sel.AddReceive(c.ended, func(ch workflow.ReceiveChannel, _ bool) {
			var key string
			ch.Receive(ctx, &key)
			c.inFlight = slices.DeleteFunc(c.inFlight, func(b InFlightBatch) bool { return b.Key == key })
			delete(c.views, key)
			delete(c.stopped, key)
		})
		if timer != nil {
			sel.AddFuture(timer, func(workflow.Future) {})
		}
		sel.Select(ctx)
	}
}

// drainItems adds the items signalled but not read yet; it returns how
// many.
func (c *batchCollector) drainItems(ctx workflow.Context) int {
	n := 0
	var it BatchItemRequest
	for c.items.ReceiveAsync(&it) {
		c.add(it)
		n++
	}
	return n
}

// add queues an item once: a repeated signal (an episode's activity
// retried) is the same item.
func (c *batchCollector) add(it BatchItemRequest) {
	if slices.ContainsFunc(c.pending, func(p BatchItemRequest) bool { return p.Ref == it.Ref }) {
		return
	}
	for _, b := range c.inFlight {
		if slices.ContainsFunc(b.Items, func(p BatchItemRequest) bool { return p.Ref == it.Ref }) {
			return
		}
	}
	c.pending = append(c.pending, it)
}

// closeBatch takes up to MaxItems pending items into a new batch under a
// fresh key and starts driving it.
func (c *batchCollector) closeBatch(ctx workflow.Context) {
	n := min(len(c.pending), c.in.MaxItems)
	items := slices.Clone(c.pending[:n])
	c.pending = slices.Delete(c.pending, 0, n)
	var key string
	// A fresh key per batch, the same on replay: a batch key is used once.
	_ = workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.NewString() }).Get(&key)
	c.closed++
	c.drive(ctx, InFlightBatch{Key: key, Items: items})
}

// drive runs one batch to its end in its own coroutine.
func (c *batchCollector) drive(ctx workflow.Context, b InFlightBatch) {
	c.inFlight = append(c.inFlight, b)
	c.views[b.Key] = activities.BatchView{Key: b.Key, State: allot.BatchOpen, Items: len(b.Items)}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			err := c.driveBatch(ctx, b)
			if err == nil {
				break
			}
			if workflow.GetVersion(ctx, batchStoppedRetryChange, workflow.DefaultVersion, batchStoppedRetryVersion) == workflow.DefaultVersion {
				workflow.GetLogger(ctx).Error("batch stopped: its items stay in the ledger as they are; an operator settles them", "batch_key", b.Key, "error", err)
				break
			}
			retryAt := workflow.Now(ctx).Add(batchStoppedRetry)
			c.stopped[b.Key] = StoppedBatch{Key: b.Key, Error: err.Error(), RetryAt: retryAt}
			workflow.GetLogger(ctx).Error("batch stopped on a refusal: mend its cause; it is driven again from the ledger's state at retry_at",
				"batch_key", b.Key, "error", err, "retry_at", retryAt)
			if err := workflow.Sleep(ctx, batchStoppedRetry); err != nil {
				break
			}
			delete(c.stopped, b.Key)
		}
		c.ended.Send(ctx, b.Key)
	})
}

func (c *batchCollector) driveBatch(ctx workflow.Context, b InFlightBatch) error {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, batchActivityOptions())
	refs := make([]allot.PaidTaskRef, 0, len(b.Items))
	items := make([]activities.BatchItemInput, 0, len(b.Items))
	notify := make(map[allot.PaidTaskRef]BatchItemRequest, len(b.Items))
	for _, it := range b.Items {
		refs = append(refs, it.Ref)
		items = append(items, activities.BatchItemInput{Ref: it.Ref, Params: it.Params})
		notify[it.Ref] = it
	}
	var opened activities.OpenBatchResult
	err := workflow.ExecuteActivity(actx, a.OpenBatch, activities.OpenBatchInput{LedgerID: c.in.LedgerID, Key: b.Key, Vendor: c.in.Vendor, Kind: c.in.Kind, Items: refs}).Get(ctx, &opened)
	if err != nil {
		return err
	}
	for _, s := range opened.Skips {
		workflow.GetLogger(ctx).Warn("item not batched", "batch_key", b.Key, "episode", s.Ref.EpisodeID, "step", s.Ref.Step, "why", s.Why)
	}
	view := opened.Batch
	for view.State == allot.BatchOpen {
		c.views[b.Key] = view
		if wait := view.LookOnlyUntil.Sub(workflow.Now(ctx)); wait > 0 {
			// An unknown outcome: look again when the window may have
			// shown the batch, create again only after it.
			if err := workflow.Sleep(ctx, min(wait, c.in.PollEvery)); err != nil {
				return err
			}
		}
		if err := workflow.ExecuteActivity(actx, a.CreateBatch, activities.CreateBatchInput{LedgerID: c.in.LedgerID, Key: b.Key, Vendor: c.in.Vendor, Items: items, Window: c.in.Window}).Get(ctx, &view); err != nil {
			return err
		}
	}
	var polled activities.PollBatchResult
	for view.State == allot.BatchCreated {
		c.views[b.Key] = view
		if err := workflow.Sleep(ctx, c.in.PollEvery); err != nil {
			return err
		}
		if err := workflow.ExecuteActivity(actx, a.PollBatch, activities.PollBatchInput{LedgerID: c.in.LedgerID, Key: b.Key, Vendor: c.in.Vendor}).Get(ctx, &polled); err != nil {
			return err
		}
		view = polled.Batch
	}
	c.views[b.Key] = view
	if view.State == allot.BatchNotCreated {
		// Refused: the ledger put every item back in the queue. Each
		// goes into one more batch (the refusal may be another item's);
		// refused again, its workflow is told why.
		for _, it := range b.Items {
			it.Refused++
			if it.Refused < batchRefusalsBeforeParking {
				c.returned.Send(ctx, it)
				continue
			}
			if err := c.notify(ctx, it, BatchItemDone{Ref: it.Ref, BatchKey: b.Key, Outcome: allot.BatchItemNotProcessed, Refused: view.Error}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, done := range polled.Items {
		it := notify[done.Ref]
		if done.Outcome == allot.BatchItemNotProcessed {
			c.returned.Send(ctx, it)
			continue
		}
		if err := c.notify(ctx, it, BatchItemDone{Ref: done.Ref, BatchKey: b.Key, VendorBatchID: view.VendorBatchID, Outcome: done.Outcome}); err != nil {
			return err
		}
	}
	return nil
}

// notify tells an item's workflow what became of it; a workflow that is
// gone has nothing to be told (the ledger has the outcome).
func (c *batchCollector) notify(ctx workflow.Context, it BatchItemRequest, done BatchItemDone) error {
	if it.NotifyWorkflowID == "" {
		return nil
	}
	err := workflow.SignalExternalWorkflow(ctx, it.NotifyWorkflowID, "", BatchItemDoneSignal, done).Get(ctx, nil)
	var notFound *temporal.UnknownExternalWorkflowExecutionError
	if err != nil && !errors.As(err, &notFound) {
		return err
	}
	return nil
}

// continueAsNew carries what is pending and in flight into a new run,
// which drives each batch on from the ledger's state.
func (c *batchCollector) continueAsNew(ctx workflow.Context) error {
	c.drainItems(ctx)
	next := c.in
	next.Pending = slices.Clone(c.pending)
	next.InFlight = slices.Clone(c.inFlight)
	return workflow.NewContinueAsNewError(ctx, BatchCollector, next)
}

// batchActivityOptions retry a batch's activities for as long as trouble
// lasts (a vendor paused or down, a busy ledger): its items hold their
// reservations meanwhile, and an operator sees them waiting. Refusals
// are not retried.
func batchActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		// The activities heartbeat while they run: a killed worker's
		// attempt is retried within seconds, not after 10 minutes with
		// the batch's items waiting.
		HeartbeatTimeout: vendorHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: append([]string{}, allot.NonRetryableErrorTypes...),
		},
	}
}
