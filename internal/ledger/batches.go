package ledger

// Vendor batches (docs/design.md, "Batches"): many paid tasks sent in one
// vendor batch at half the price, each keeping its own once-guarantee.
//
// A batch item is an ordinary paid task. Its intent, with its budget
// reservation, is written while it waits for a batch: owned by BatchQueue.
// OpenBatch writes the batch's key and moves the items' intents to the
// batch (owner BatchOwner(key)) in one transaction, before the vendor is
// asked for anything. The create itself is an intent: BeginBatchCreate
// marks the batch and its items maybe-sent, as MarkSending does a task,
// and returns the tasks the create carries (an item abandoned since the
// batch opened is left out, recorded not_processed, never sent);
// the key travels in the batch's metadata, so a create whose answer was
// lost is found in the vendor's list (RecordBatchCreated), or is unknown
// (RecordBatchUnknown: only the list is read until its look-only window
// has passed), or was refused (RecordBatchNotCreated: the items go back to
// the queue). Once the batch has ended, SettleBatchItem records each item
// once: its result and cost under its task, or back to the queue when it
// was not processed (same key, a new batch), or parked maybe-sent when
// what became of it is lost. EndBatch closes the batch when every item has
// its outcome.
//
// A batch's states and the only moves between them (batchMoves):
//
//	open    -> open         BeginBatchCreate, RecordBatchUnknown
//	open    -> created      RecordBatchCreated: the vendor made it (or it was found under its key)
//	open    -> not_created  RecordBatchNotCreated: the vendor refused the create;
//	                        BeginBatchCreate: no item was left to send
//	created -> created      RecordBatchCreated again: a later status
//	created -> ended        EndBatch: every item's outcome is recorded
//
// Every change goes through changeBatchTx, under the batch's lock.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// BatchQueue owns the intent of a paid task that waits for a batch: no
// attempt sends it; OpenBatch hands it to a batch.
const BatchQueue = "batch-queue"

// BatchOwner is the owner of the intents a batch carries.
func BatchOwner(key string) string { return batchOwnerPrefix + key }

const batchOwnerPrefix = "batch:"

// queuedBatchItems counts the items of vendor's batches, but except's,
// that the vendor may hold and has not ended: the unsettled items of
// created batches and of open ones whose create may have landed (an item
// left out of its create is settled, and was never sent).
func (l *Ledger) queuedBatchItems(ctx context.Context, tx *sql.Tx, vendor, except string) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM paid_batch_items i JOIN paid_batches b ON b.batch_key = i.batch_key
		WHERE b.vendor = ? AND b.batch_key <> ? AND i.outcome = '' AND (b.state = ? OR (b.state = ? AND b.maybe_sent = ?))`),
		vendor, except, string(allot.BatchCreated), string(allot.BatchOpen), true).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger %s: count vendor %s's queued batch items: %w", l.where, vendor, err)
	}
	return n, nil
}

// BatchOfOwner is the key of the batch that owns an intent, when a batch
// does (owner BatchOwner(key)).
func BatchOfOwner(owner string) (key string, ok bool) {
	key, ok = strings.CutPrefix(owner, batchOwnerPrefix)
	return key, ok && key != ""
}

// batchMoves lists, for each batch state, the states it may move to.
var batchMoves = map[allot.BatchState][]allot.BatchState{
	allot.BatchOpen:       {allot.BatchOpen, allot.BatchCreated, allot.BatchNotCreated},
	allot.BatchCreated:    {allot.BatchCreated, allot.BatchEnded},
	allot.BatchEnded:      nil,
	allot.BatchNotCreated: nil,
}

var (
	// ErrBatchNotFound: no batch was opened under the key.
	ErrBatchNotFound = &allot.Error{Type: allot.InvalidInput, Message: "batch not found"}
	// ErrBatchState: the batch is not in a state that allows this; the
	// message names its state and the states that would.
	ErrBatchState = &allot.Error{Type: allot.PaidTaskStateConflict, Message: "batch is not in a state that allows this"}
	// ErrBatchLookOnly: an earlier create's outcome is unknown and the
	// vendor may still list it late: until the window has passed, the
	// vendor's list is read and nothing is created.
	ErrBatchLookOnly = errors.New("batch create outcome unknown: look only")
	// ErrBatchQueueFull: the vendor's unfinished batches hold so many
	// items that this batch's would go over its batch_max_queued_items;
	// nothing was marked, and the create waits for some to end.
	ErrBatchQueueFull = errors.New("the vendor's batch queue is full")
	// ErrNothingToBatch: none of the items asked for can be carried by
	// a batch (each skip says why); nothing was written.
	ErrNothingToBatch = errors.New("no item can be carried by the batch")
)

// PaidBatch is one vendor batch as the ledger keeps it.
type PaidBatch struct {
	Key    string           `json:"key"` // the batch's idempotency key, sent in its metadata
	Vendor string           `json:"vendor"`
	Kind   string           `json:"kind"`
	State  allot.BatchState `json:"state"`
	// VendorBatchID is the vendor's ID of the batch, once it made it.
	VendorBatchID string `json:"vendor_batch_id,omitempty"`
	// MaybeSent: a create began whose answer never came; the vendor may
	// hold the batch. SendingUntil is that create's deadline.
	MaybeSent    bool      `json:"maybe_sent,omitempty"`
	SendingUntil time.Time `json:"sending_until,omitzero"`
	// LookOnlyUntil: after an unknown outcome, the vendor's list is only
	// read until then (a vendor may list a new batch late).
	LookOnlyUntil time.Time `json:"look_only_until,omitzero"`
	// Status is the vendor's status of the batch, as last seen.
	Status string `json:"status,omitempty"`
	// ResultsExpireAt is when the vendor drops the batch's results.
	ResultsExpireAt time.Time `json:"results_expire_at,omitzero"`
	// Error says why the last create did not settle, or was refused.
	Error     string          `json:"error,omitempty"`
	Items     []PaidBatchItem `json:"items"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// PaidBatchItem is one paid task a batch carries, and what became of it
// ("" until the batch ended and the item was settled).
type PaidBatchItem struct {
	PaidTaskRef
	Outcome allot.BatchItemOutcome `json:"outcome,omitempty"`
}

// Settled counts the items whose outcome is recorded.
func (b PaidBatch) Settled() int {
	n := 0
	for _, it := range b.Items {
		if it.Outcome != "" {
			n++
		}
	}
	return n
}

// OpenBatchInput names a batch and the paid tasks it is to carry.
type OpenBatchInput struct {
	Key    string
	Vendor string
	Kind   string
	Items  []PaidTaskRef
}

// BatchSkip is an item OpenBatch did not put in the batch, and why.
type BatchSkip struct {
	Ref PaidTaskRef `json:"ref"`
	Why string      `json:"why"`
}

func batchDescribe(key string) string { return fmt.Sprintf("batch %s", key) }

func batchLockKey(key string) int64 { return advisoryKey("batch", key) }

// batchQueueLockKey serializes the creates of one vendor's batches, so
// that two never both take the last room of its queue.
func batchQueueLockKey(vendor string) int64 { return advisoryKey("batch-queue", vendor) }

// OpenBatch writes a batch under in.Key and hands it the items that wait
// for one, in one transaction: each item must be an intent owned by
// BatchQueue and not maybe-sent (its reservation is already held); it
// becomes owned by the batch. Items that cannot be carried are returned as
// skips with the reason; if none can, nothing is written and the error is
// ErrNothingToBatch. A batch already opened under the key is returned as
// stored (a retry), with no skips; under another vendor or kind it is
// refused.
func (l *Ledger) OpenBatch(ctx context.Context, in OpenBatchInput) (PaidBatch, []BatchSkip, error) {
	switch {
	case in.Key == "" || in.Kind == "":
		return PaidBatch{}, nil, invalid("a batch needs its key and its kind, got %q and %q", in.Key, in.Kind)
	case len(in.Items) == 0:
		return PaidBatch{}, nil, invalid("%s has no items: a batch carries at least one paid task", batchDescribe(in.Key))
	}
	items := slices.Clone(in.Items)
	for _, r := range items {
		if err := checkPaidRef(r); err != nil {
			return PaidBatch{}, nil, err
		}
	}
	// One lock order for every writer that locks several episodes.
	slices.SortFunc(items, comparePaidRefs)
	if i := firstDuplicateRef(items); i >= 0 {
		return PaidBatch{}, nil, invalid("%s names %s twice: a task is one item of a batch", batchDescribe(in.Key), describe(items[i]))
	}
	var (
		out   PaidBatch
		skips []BatchSkip
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		skips = nil
		if err := l.lockTx(ctx, tx, batchLockKey(in.Key), batchDescribe(in.Key)); err != nil {
			return err
		}
		b, ok, err := l.getBatch(ctx, tx, in.Key)
		if err != nil {
			return err
		}
		if ok {
			if b.Vendor != in.Vendor || b.Kind != in.Kind {
				return invalid("%s is vendor %q's batch of %q, not vendor %q's of %q: a batch key is used once", batchDescribe(in.Key), b.Vendor, b.Kind, in.Vendor, in.Kind)
			}
			out = b
			return nil
		}
		var carried []PaidTaskRef
		for _, r := range items {
			if err := l.lockEpisodeTx(ctx, tx, r.Pipeline, r.EpisodeID); err != nil {
				return err
			}
			t, ok, err := l.getPaidTask(ctx, tx, r)
			switch {
			case err != nil:
				return err
			case !ok:
				skips = append(skips, BatchSkip{r, "it was never written: write its intent (owned by the batch queue) first"})
			case t.State != allot.PaidIntent:
				skips = append(skips, BatchSkip{r, fmt.Sprintf("it is %s, not an intent waiting for a batch", t.State)})
			case t.Owner != BatchQueue:
				skips = append(skips, BatchSkip{r, fmt.Sprintf("its intent is owned by %q, not the batch queue", t.Owner)})
			case t.MaybeSent:
				skips = append(skips, BatchSkip{r, "an earlier send may have reached the vendor: its outcome is settled first"})
			default:
				carried = append(carried, r)
			}
		}
		if len(carried) == 0 {
			var why []string
			for _, s := range skips {
				why = append(why, describe(s.Ref)+": "+s.Why)
			}
			return fmt.Errorf("%w: %s: %s; nothing was written", ErrNothingToBatch, batchDescribe(in.Key), strings.Join(why, "; "))
		}
		at := now()
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO paid_batches (batch_key, vendor, kind, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)`), in.Key, in.Vendor, in.Kind, string(allot.BatchOpen), l.d.timeArg(at), l.d.timeArg(at)); err != nil {
			return fmt.Errorf("ledger %s: insert %s: %w", l.where, batchDescribe(in.Key), err)
		}
		for _, r := range carried {
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO paid_batch_items (batch_key, pipeline, episode_id, step, revision)
				VALUES (?, ?, ?, ?, ?)`), in.Key, r.Pipeline, r.EpisodeID, r.Step, r.Revision); err != nil {
				return fmt.Errorf("ledger %s: insert %s's item %s: %w", l.where, batchDescribe(in.Key), describe(r), err)
			}
			if _, err := l.changePaidTaskTx(ctx, tx, r, func(_ *sql.Tx, t *PaidTask) error {
				t.Owner = BatchOwner(in.Key)
				return nil
			}); err != nil {
				return err
			}
		}
		b, _, err = l.getBatch(ctx, tx, in.Key)
		out = b
		return err
	})
	if err != nil {
		return PaidBatch{}, skips, err
	}
	return out, skips, nil
}

// BeginBatchCreate is BeginBatchCreateItems for a caller that needs only
// the batch.
func (l *Ledger) BeginBatchCreate(ctx context.Context, key string, at, until time.Time, maxQueued int) (PaidBatch, error) {
	b, _, err := l.BeginBatchCreateItems(ctx, key, at, until, maxQueued)
	return b, err
}

// BeginBatchCreateItems records, right before the vendor is asked to
// create the batch, that the create is under way until until, and returns
// the tasks the create carries, read in the transaction that marks them:
// the request is built from these alone, so that nothing changed between
// a read and the mark is sent.
//
// The first create decides the batch's items. An item whose task is no
// longer the batch's intent (an operator abandoned it from outside after
// the batch opened) is left out: its outcome is recorded not_processed
// (nothing was sent) and its task stays as it is. The others, and the
// batch, are maybe-sent from here (each item's first send is now, for the
// vendor's idempotency horizon). If no item is left, nothing is to be
// sent: the batch ends not_created, with why, and no task is returned.
// A later create of the batch (its earlier answer lost) carries the same
// items under the same key, whatever became of their tasks since: the
// vendor may already hold them under that key.
//
// The batch must be open, and past its look-only window at at, the
// caller's clock (ErrBatchLookOnly). With maxQueued above 0 (the vendor's
// batch_max_queued_items), the unsettled items of the vendor's other
// batches that may be at the vendor (a created batch, an open one whose
// create may have landed) and the items this first create sends together
// must not exceed it (ErrBatchQueueFull, nothing marked): the vendor
// counts every item it holds against its queue, as OpenAI's enqueued
// limit and Anthropic's processing queue do, and refuses what is over.
func (l *Ledger) BeginBatchCreateItems(ctx context.Context, key string, at, until time.Time, maxQueued int) (PaidBatch, []PaidTask, error) {
	if until.IsZero() {
		return PaidBatch{}, nil, invalid("%s: a create needs its deadline", batchDescribe(key))
	}
	if maxQueued < 0 {
		return PaidBatch{}, nil, invalid("%s: a batch queue of %d items: give the vendor's batch_max_queued_items, or 0 for no cap", batchDescribe(key), maxQueued)
	}
	var send []PaidTask
	b, err := l.changeBatch(ctx, key, func(tx *sql.Tx, b *PaidBatch) error {
		send = nil
		if b.State != allot.BatchOpen {
			return batchStateErr(*b, "creating it at the vendor", allot.BatchOpen)
		}
		if at.Before(b.LookOnlyUntil) {
			return fmt.Errorf("%w: %s: an earlier create's outcome is unknown and the vendor may still list it until %s: look it up (FindBatch), create nothing",
				ErrBatchLookOnly, batchDescribe(key), b.LookOnlyUntil.Format(time.RFC3339))
		}
		first := !b.MaybeSent
		capped := maxQueued > 0 && first
		if capped {
			// Taken before the items' episodes, as ever: one lock order.
			if err := l.lockTx(ctx, tx, batchQueueLockKey(b.Vendor), "vendor "+b.Vendor+"'s batch queue"); err != nil {
				return err
			}
		}
		var left []string
		for _, it := range b.Items {
			if it.Outcome != "" {
				continue
			}
			// Read under the episode's lock, as an abandon writes it: an
			// abandon lands before this mark (left out) or after it.
			t, err := l.changePaidTaskTx(ctx, tx, it.PaidTaskRef, func(_ *sql.Tx, t *PaidTask) error {
				if t.State == allot.PaidIntent && t.Owner == BatchOwner(b.Key) {
					markItemSent(t)
					t.SendingUntil = normTime(until)
				}
				return nil
			})
			if err != nil {
				return err
			}
			sendable := t.State == allot.PaidIntent && t.Owner == BatchOwner(b.Key)
			if !first || sendable {
				send = append(send, t)
				continue
			}
			if err := l.setItemOutcomeTx(ctx, tx, b.Key, it.PaidTaskRef, allot.BatchItemNotProcessed); err != nil {
				return err
			}
			left = append(left, fmt.Sprintf("%s is %s", describe(it.PaidTaskRef), t.State))
		}
		if len(send) == 0 {
			b.State, b.MaybeSent, b.Error = allot.BatchNotCreated, false,
				"nothing to send: every item's task was given up before the create ("+strings.Join(left, "; ")+"); no batch was created at the vendor"
			return nil
		}
		if capped {
			queued, err := l.queuedBatchItems(ctx, tx, b.Vendor, b.Key)
			if err != nil {
				return err
			}
			if queued+len(send) > maxQueued {
				return fmt.Errorf("%w: vendor %s's unfinished batches hold %d items and %s would send %d, over its batch_max_queued_items of %d: nothing was marked; create it once enough of them have ended",
					ErrBatchQueueFull, b.Vendor, queued, batchDescribe(key), len(send), maxQueued)
			}
		}
		b.MaybeSent, b.SendingUntil, b.Error = true, normTime(until), ""
		return nil
	})
	if err != nil {
		return PaidBatch{}, nil, err
	}
	return b, send, nil
}

// RecordBatchCreated writes the vendor's ID of the batch, from the
// create's answer or from the vendor's list under the batch's key, and
// the status seen (again later, each status the vendor reports). An open
// batch becomes created; its items stay maybe-sent intents until each is
// settled. A created batch keeps its ID: another is ErrRemoteRefConflict.
func (l *Ledger) RecordBatchCreated(ctx context.Context, key, vendorBatchID, status string, resultsExpireAt time.Time) (PaidBatch, error) {
	if vendorBatchID == "" || status == "" {
		return PaidBatch{}, invalid("%s: a created batch needs the vendor's ID and status, got %q and %q", batchDescribe(key), vendorBatchID, status)
	}
	return l.changeBatch(ctx, key, func(tx *sql.Tx, b *PaidBatch) error {
		switch {
		case b.State != allot.BatchOpen && b.State != allot.BatchCreated:
			return batchStateErr(*b, "recording the vendor's batch", allot.BatchOpen, allot.BatchCreated)
		case b.VendorBatchID != "" && b.VendorBatchID != vendorBatchID:
			return fmt.Errorf("%w: %s is the vendor's batch %s, not %s: one key, one batch; look at both at the vendor",
				ErrRemoteRefConflict, batchDescribe(key), b.VendorBatchID, vendorBatchID)
		}
		if b.VendorBatchID == "" {
			other, err := l.queryStrings(ctx, tx, "look up vendor batch "+vendorBatchID,
				`SELECT batch_key FROM paid_batches WHERE vendor = ? AND vendor_batch_id = ?`, b.Vendor, vendorBatchID)
			if err != nil {
				return err
			}
			if len(other) > 0 {
				return fmt.Errorf("%w: vendor batch %s is already %s; %s cannot be it too: one vendor batch, one key; look at the batch's metadata at the vendor",
					ErrRemoteRefConflict, vendorBatchID, batchDescribe(other[0]), batchDescribe(key))
			}
		}
		first := b.State == allot.BatchOpen
		b.State, b.VendorBatchID, b.Status, b.MaybeSent, b.Error = allot.BatchCreated, vendorBatchID, status, false, ""
		if !resultsExpireAt.IsZero() {
			b.ResultsExpireAt = normTime(resultsExpireAt)
		}
		if !first {
			return nil
		}
		// The vendor holds the items now, whatever this worker began.
		return l.changeBatchItemsTx(ctx, tx, *b, markItemSent)
	})
}

// RecordBatchUnknown records that a create's answer was lost and the
// vendor does not list a batch under its key (yet): the batch stays open
// and maybe-sent, and until lookOnlyUntil only the vendor's list is read
// (BeginBatchCreate refuses). why is kept for the operator. The create
// must have begun (BeginBatchCreate), which decided the items it carries.
func (l *Ledger) RecordBatchUnknown(ctx context.Context, key string, lookOnlyUntil time.Time, why string) (PaidBatch, error) {
	if lookOnlyUntil.IsZero() || why == "" {
		return PaidBatch{}, invalid("%s: an unknown outcome needs its look-only window and why, got %v and %q", batchDescribe(key), lookOnlyUntil, why)
	}
	return l.changeBatch(ctx, key, func(tx *sql.Tx, b *PaidBatch) error {
		if b.State != allot.BatchOpen {
			return batchStateErr(*b, "recording an unknown create", allot.BatchOpen)
		}
		if !b.MaybeSent {
			return fmt.Errorf("%w: %s: no create of it began (BeginBatchCreate), so none can have an unknown outcome", ErrBatchState, batchDescribe(key))
		}
		if lookOnlyUntil.After(b.LookOnlyUntil) {
			b.LookOnlyUntil = normTime(lookOnlyUntil)
		}
		b.MaybeSent, b.Error = true, why
		// The create may have landed: so may its items.
		return l.changeBatchItemsTx(ctx, tx, *b, markItemSent)
	})
}

// RecordBatchNotCreated records that the vendor refused the create (it
// answered, so it made nothing): the batch ends not created and its items
// go back to the queue, not maybe-sent, still holding their reservations,
// for another batch under another key.
func (l *Ledger) RecordBatchNotCreated(ctx context.Context, key, why string) (PaidBatch, error) {
	if why == "" {
		return PaidBatch{}, invalid("%s: a refused create needs the vendor's reason", batchDescribe(key))
	}
	return l.changeBatch(ctx, key, func(tx *sql.Tx, b *PaidBatch) error {
		if b.State != allot.BatchOpen {
			return batchStateErr(*b, "recording a refused create", allot.BatchOpen)
		}
		b.State, b.MaybeSent, b.Error = allot.BatchNotCreated, false, why
		if at := now(); at.Before(b.SendingUntil) {
			b.SendingUntil = at
		}
		if err := l.changeBatchItemsTx(ctx, tx, *b, func(t *PaidTask) {
			t.Owner, t.MaybeSent = BatchQueue, false // refused: none of them reached the vendor
		}); err != nil {
			return err
		}
		return l.setItemOutcomesTx(ctx, tx, b.Key, allot.BatchItemNotProcessed)
	})
}

// BatchItemSettlement is what an ended batch did with one item.
type BatchItemSettlement struct {
	Ref     PaidTaskRef
	Outcome allot.BatchItemOutcome
	// RemoteRef is the vendor's reference of the item (succeeded, failed).
	RemoteRef string
	// Amount and Currency are what the vendor billed for it (succeeded).
	Amount   int64
	Currency string
	// Artifact and SHA256 are its verified result (succeeded).
	Artifact string
	SHA256   string
	// Error is why it failed, was not processed, or is lost.
	Error string
}

// SettleBatchItem records the outcome of one item of a created batch, once,
// in one transaction with its task:
//   - succeeded: the vendor's reference, the cost (the reservation becomes
//     it) and the verified result; the task succeeds;
//   - failed: the reference; the task fails (nothing billed, the
//     reservation is released);
//   - not_processed: the task goes back to the queue, not maybe-sent,
//     keeping its key and reservation, for the next batch;
//   - result_lost: the task stays a maybe-sent intent (OutcomeUnknown),
//     parked for an operator: it may have been billed, so it is never
//     sent again by itself.
//
// Settling an item again with the same outcome changes nothing; another
// outcome is refused. added is what the write added to the ledger's costs
// (see RecordSubmissionAdded): counters add it, so a cost counts once.
func (l *Ledger) SettleBatchItem(ctx context.Context, key string, s BatchItemSettlement) (out PaidTask, added int64, err error) {
	if err := checkPaidRef(s.Ref); err != nil {
		return PaidTask{}, 0, err
	}
	switch s.Outcome {
	case allot.BatchItemSucceeded:
		if s.RemoteRef == "" || s.Artifact == "" || s.SHA256 == "" {
			return PaidTask{}, 0, invalid("%s: a succeeded item of %s needs the vendor's reference, the artifact and its SHA-256", describe(s.Ref), batchDescribe(key))
		}
		if err := checkSubmission(Submission{PaidTaskRef: s.Ref, RemoteRef: s.RemoteRef, Amount: s.Amount, Currency: s.Currency}); err != nil {
			return PaidTask{}, 0, err
		}
	case allot.BatchItemFailed:
		if s.RemoteRef == "" || s.Error == "" {
			return PaidTask{}, 0, invalid("%s: a failed item of %s needs the vendor's reference and why", describe(s.Ref), batchDescribe(key))
		}
	case allot.BatchItemNotProcessed, allot.BatchItemResultLost:
	default:
		return PaidTask{}, 0, invalid("%s: %q is not an item outcome (succeeded, failed, not_processed, result_lost)", describe(s.Ref), s.Outcome)
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockTx(ctx, tx, batchLockKey(key), batchDescribe(key)); err != nil {
			return err
		}
		b, ok, err := l.getBatch(ctx, tx, key)
		switch {
		case err != nil:
			return err
		case !ok:
			return batchNotFound(key)
		case b.State != allot.BatchCreated && b.State != allot.BatchEnded:
			return batchStateErr(b, "settling an item", allot.BatchCreated)
		}
		i := slices.IndexFunc(b.Items, func(it PaidBatchItem) bool { return it.PaidTaskRef == s.Ref })
		switch {
		case i < 0:
			return invalid("%s does not carry %s", batchDescribe(key), describe(s.Ref))
		case b.Items[i].Outcome == s.Outcome:
			out, _, err = l.getPaidTask(ctx, tx, s.Ref)
			return err
		case b.Items[i].Outcome != "":
			return fmt.Errorf("%w: %s's item %s was settled %s; refusing %s: an item's outcome is recorded once",
				ErrBatchState, batchDescribe(key), describe(s.Ref), b.Items[i].Outcome, s.Outcome)
		}
		t, ok, err := l.getPaidTask(ctx, tx, s.Ref)
		switch {
		case err != nil:
			return err
		case ok && t.State == allot.PaidAbandoned:
			// An operator abandoned the task while its batch ran (from
			// outside its episode, which refuses commands while it waits
			// on a batch): the task is the operator's now and stays as
			// it is. The item's outcome goes on the batch all the same,
			// so that the batch can end; a charge for the task is money
			// the ledger does not hold, which the reconciler reports.
			out = t
		default:
			if out, added, err = l.settleItemTaskTx(ctx, tx, key, s); err != nil {
				return err
			}
		}
		return l.setItemOutcomeTx(ctx, tx, key, s.Ref, s.Outcome)
	})
	if err != nil {
		return PaidTask{}, 0, err
	}
	return out, added, nil
}

// settleItemTaskTx moves the item's task as its outcome says.
func (l *Ledger) settleItemTaskTx(ctx context.Context, tx *sql.Tx, key string, s BatchItemSettlement) (PaidTask, int64, error) {
	owned := func(t *PaidTask) error {
		if t.State != allot.PaidIntent || t.Owner != BatchOwner(key) {
			return stateErr(*t, "settling it as an item of "+batchDescribe(key), states(allot.PaidIntent),
				"only the batch that carries the intent settles it")
		}
		return nil
	}
	switch s.Outcome {
	case allot.BatchItemSucceeded, allot.BatchItemFailed:
		if _, err := l.changePaidTaskTx(ctx, tx, s.Ref, func(_ *sql.Tx, t *PaidTask) error { return owned(t) }); err != nil {
			return PaidTask{}, 0, err
		}
		sub := Submission{PaidTaskRef: s.Ref, RemoteRef: s.RemoteRef}
		if s.Outcome == allot.BatchItemSucceeded {
			sub.Amount, sub.Currency = s.Amount, s.Currency
		}
		_, added, err := l.recordSubmissionCostTx(ctx, tx, sub)
		if err != nil {
			return PaidTask{}, 0, err
		}
		t, err := l.changePaidTaskTx(ctx, tx, s.Ref, func(_ *sql.Tx, t *PaidTask) error {
			if s.Outcome == allot.BatchItemSucceeded {
				t.State, t.Artifact, t.SHA256 = allot.PaidSucceeded, s.Artifact, s.SHA256
			} else {
				t.State, t.Error = allot.PaidFailed, s.Error
			}
			return nil
		})
		return t, added, err
	case allot.BatchItemNotProcessed:
		t, err := l.changePaidTaskTx(ctx, tx, s.Ref, func(_ *sql.Tx, t *PaidTask) error {
			if err := owned(t); err != nil {
				return err
			}
			t.Owner, t.MaybeSent = BatchQueue, false // not run: safe to send again under its key
			if at := now(); at.Before(t.SendingUntil) {
				t.SendingUntil = at
			}
			return nil
		})
		return t, 0, err
	default: // result_lost
		t, err := l.changePaidTaskTx(ctx, tx, s.Ref, func(_ *sql.Tx, t *PaidTask) error {
			if err := owned(t); err != nil {
				return err
			}
			t.MaybeSent = true
			return nil
		})
		return t, 0, err
	}
}

// EndBatch closes a created batch whose every item is settled, with the
// vendor's final status. An ended batch is returned as it is.
func (l *Ledger) EndBatch(ctx context.Context, key, status string) (PaidBatch, error) {
	if status == "" {
		return PaidBatch{}, invalid("%s: ending it needs the vendor's final status", batchDescribe(key))
	}
	return l.changeBatch(ctx, key, func(_ *sql.Tx, b *PaidBatch) error {
		switch {
		case b.State == allot.BatchEnded:
			return nil
		case b.State != allot.BatchCreated:
			return batchStateErr(*b, "ending it", allot.BatchCreated)
		}
		if n := b.Settled(); n < len(b.Items) {
			return fmt.Errorf("%w: %s has %d of its %d items without an outcome: settle each (SettleBatchItem) first",
				ErrBatchState, batchDescribe(b.Key), len(b.Items)-n, len(b.Items))
		}
		b.State, b.Status = allot.BatchEnded, status
		return nil
	})
}

// Batch returns the batch opened under key (ErrBatchNotFound if none).
func (l *Ledger) Batch(ctx context.Context, key string) (PaidBatch, error) {
	b, ok, err := l.getBatch(ctx, l.r, key)
	if err != nil {
		return PaidBatch{}, err
	}
	if !ok {
		return PaidBatch{}, batchNotFound(key)
	}
	return b, nil
}

// TaskBatches returns the batches that carried the task, oldest first
// (a task not processed by one goes into the next).
func (l *Ledger) TaskBatches(ctx context.Context, ref PaidTaskRef) ([]PaidBatch, error) {
	if err := checkPaidRef(ref); err != nil {
		return nil, err
	}
	keys, err := l.queryStrings(ctx, l.r, "list the batches of "+describe(ref),
		`SELECT i.batch_key FROM paid_batch_items i JOIN paid_batches b ON b.batch_key = i.batch_key
		WHERE i.pipeline = ? AND i.episode_id = ? AND i.step = ? AND i.revision = ? ORDER BY b.created_at, b.batch_key`,
		ref.Pipeline, ref.EpisodeID, ref.Step, ref.Revision)
	if err != nil {
		return nil, err
	}
	return l.batchesByKey(ctx, keys)
}

func (l *Ledger) batchesByKey(ctx context.Context, keys []string) ([]PaidBatch, error) {
	out := make([]PaidBatch, 0, len(keys))
	for _, k := range keys {
		b, ok, err := l.getBatch(ctx, l.r, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// UnendedBatches returns the batches that are open or created, oldest
// first: the ones a collector still drives.
func (l *Ledger) UnendedBatches(ctx context.Context) ([]PaidBatch, error) {
	keys, err := l.queryStrings(ctx, l.r, "list unended batches",
		`SELECT batch_key FROM paid_batches WHERE state IN ('open', 'created') ORDER BY created_at, batch_key`)
	if err != nil {
		return nil, err
	}
	return l.batchesByKey(ctx, keys)
}

// changeBatch is changeBatchTx in a transaction of its own.
func (l *Ledger) changeBatch(ctx context.Context, key string, change func(tx *sql.Tx, b *PaidBatch) error) (PaidBatch, error) {
	var out PaidBatch
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.changeBatchTx(ctx, tx, key, change)
		return err
	})
	if err != nil {
		return PaidBatch{}, err
	}
	return out, nil
}

// changeBatchTx is the one path that changes a stored batch: under the
// batch's lock it reads it (ErrBatchNotFound), lets change refuse or edit
// it, checks the move against batchMoves, and saves it if anything changed.
func (l *Ledger) changeBatchTx(ctx context.Context, tx *sql.Tx, key string, change func(tx *sql.Tx, b *PaidBatch) error) (PaidBatch, error) {
	if err := l.lockTx(ctx, tx, batchLockKey(key), batchDescribe(key)); err != nil {
		return PaidBatch{}, err
	}
	before, ok, err := l.getBatch(ctx, tx, key)
	if err != nil {
		return PaidBatch{}, err
	}
	if !ok {
		return PaidBatch{}, batchNotFound(key)
	}
	b := before
	b.Items = slices.Clone(before.Items)
	if err := change(tx, &b); err != nil {
		return PaidBatch{}, err
	}
	if !slices.Contains(batchMoves[before.State], b.State) {
		if b.State == before.State {
			return b, nil // a final batch, unchanged
		}
		return PaidBatch{}, fmt.Errorf("%w: %s cannot move from %s to %s", ErrBatchState, batchDescribe(key), before.State, b.State)
	}
	b.UpdatedAt = now()
	if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE paid_batches SET state = ?, vendor_batch_id = ?, maybe_sent = ?, sending_until = ?,
			look_only_until = ?, status = ?, results_expire_at = ?, error = ?, updated_at = ?
		WHERE batch_key = ?`),
		string(b.State), b.VendorBatchID, b.MaybeSent, l.d.timeArg(b.SendingUntil), l.d.timeArg(b.LookOnlyUntil), b.Status,
		l.d.timeArg(b.ResultsExpireAt), b.Error, l.d.timeArg(b.UpdatedAt), key); err != nil {
		return PaidBatch{}, fmt.Errorf("ledger %s: update %s: %w", l.where, batchDescribe(key), err)
	}
	return l.mustBatchTx(ctx, tx, key)
}

func (l *Ledger) mustBatchTx(ctx context.Context, tx *sql.Tx, key string) (PaidBatch, error) {
	b, ok, err := l.getBatch(ctx, tx, key)
	if err == nil && !ok {
		err = fmt.Errorf("ledger %s: %s is not there after it was written", l.where, batchDescribe(key))
	}
	return b, err
}

// changeBatchItemsTx edits the intent of each item the batch still owns;
// items settled or moved on are left as they are.
func (l *Ledger) changeBatchItemsTx(ctx context.Context, tx *sql.Tx, b PaidBatch, edit func(t *PaidTask)) error {
	for _, it := range b.Items {
		if it.Outcome != "" {
			continue
		}
		if _, err := l.changePaidTaskTx(ctx, tx, it.PaidTaskRef, func(_ *sql.Tx, t *PaidTask) error {
			if t.State == allot.PaidIntent && t.Owner == BatchOwner(b.Key) {
				edit(t)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// markItemSent marks an item's intent as maybe at the vendor: its first
// send is now, for the vendor's idempotency horizon, if it had none.
func markItemSent(t *PaidTask) {
	t.MaybeSent = true
	if t.FirstSentAt.IsZero() {
		t.FirstSentAt = now()
	}
}

// setItemOutcomeTx records one item's outcome on its batch.
func (l *Ledger) setItemOutcomeTx(ctx context.Context, tx *sql.Tx, key string, ref PaidTaskRef, o allot.BatchItemOutcome) error {
	if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE paid_batch_items SET outcome = ?
		WHERE batch_key = ? AND pipeline = ? AND episode_id = ? AND step = ? AND revision = ?`),
		string(o), key, ref.Pipeline, ref.EpisodeID, ref.Step, ref.Revision); err != nil {
		return fmt.Errorf("ledger %s: settle %s's item %s: %w", l.where, batchDescribe(key), describe(ref), err)
	}
	return nil
}

func (l *Ledger) setItemOutcomesTx(ctx context.Context, tx *sql.Tx, key string, o allot.BatchItemOutcome) error {
	if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE paid_batch_items SET outcome = ? WHERE batch_key = ? AND outcome = ''`), string(o), key); err != nil {
		return fmt.Errorf("ledger %s: settle the items of %s: %w", l.where, batchDescribe(key), err)
	}
	return nil
}

func (l *Ledger) getBatch(ctx context.Context, db querier, key string) (PaidBatch, bool, error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT batch_key, vendor, kind, state, vendor_batch_id, maybe_sent, sending_until,
			look_only_until, status, results_expire_at, error, created_at, updated_at
		FROM paid_batches WHERE batch_key = ?`), key)
	if err != nil {
		return PaidBatch{}, false, fmt.Errorf("ledger %s: read %s: %w", l.where, batchDescribe(key), err)
	}
	var (
		b     PaidBatch
		found bool
	)
	for rows.Next() {
		var state string
		if err := rows.Scan(&b.Key, &b.Vendor, &b.Kind, &state, &b.VendorBatchID, &b.MaybeSent, dbTime{&b.SendingUntil},
			dbTime{&b.LookOnlyUntil}, &b.Status, dbTime{&b.ResultsExpireAt}, &b.Error, dbTime{&b.CreatedAt}, dbTime{&b.UpdatedAt}); err != nil {
			rows.Close()
			return PaidBatch{}, false, fmt.Errorf("ledger %s: read %s: %w", l.where, batchDescribe(key), err)
		}
		b.State, found = allot.BatchState(state), true
	}
	rows.Close()
	if err := rows.Err(); err != nil || !found {
		return PaidBatch{}, false, err
	}
	items, err := db.QueryContext(ctx, l.d.q(`SELECT pipeline, episode_id, step, revision, outcome FROM paid_batch_items
		WHERE batch_key = ? ORDER BY pipeline, episode_id, step, revision`), key)
	if err != nil {
		return PaidBatch{}, false, fmt.Errorf("ledger %s: read the items of %s: %w", l.where, batchDescribe(key), err)
	}
	defer items.Close()
	for items.Next() {
		var (
			it      PaidBatchItem
			outcome string
		)
		if err := items.Scan(&it.Pipeline, &it.EpisodeID, &it.Step, &it.Revision, &outcome); err != nil {
			return PaidBatch{}, false, fmt.Errorf("ledger %s: read the items of %s: %w", l.where, batchDescribe(key), err)
		}
		it.Outcome = allot.BatchItemOutcome(outcome)
		b.Items = append(b.Items, it)
	}
	return b, true, items.Err()
}

func batchNotFound(key string) error {
	return fmt.Errorf("%w: no batch was opened under key %q: check the key against the episode's waiting_batch", ErrBatchNotFound, key)
}

func batchStateErr(b PaidBatch, op string, allowed ...allot.BatchState) error {
	var ss []string
	for _, s := range allowed {
		ss = append(ss, string(s))
	}
	return fmt.Errorf("%w: %s is %s; %s needs it %s", ErrBatchState, batchDescribe(b.Key), b.State, op, orList(ss))
}

// comparePaidRefs orders task references (pipeline, episode, step, revision).
func comparePaidRefs(a, b PaidTaskRef) int {
	if c := strings.Compare(a.Pipeline, b.Pipeline); c != 0 {
		return c
	}
	if c := strings.Compare(a.EpisodeID, b.EpisodeID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Step, b.Step); c != 0 {
		return c
	}
	return a.Revision - b.Revision
}

// firstDuplicateRef returns the index of the first of two equal neighbours
// in sorted refs, or -1.
func firstDuplicateRef(refs []PaidTaskRef) int {
	for i := 1; i < len(refs); i++ {
		if refs[i] == refs[i-1] {
			return i
		}
	}
	return -1
}
