package ledger

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
)

// Conformance tests of vendor batches (batches.go; docs/design.md,
// "Batches"), registered in runConformance so that both drivers run them.

// queueItems allocates n episodes of pipeline "evals" and writes one
// "score" task of each as an intent waiting for a batch, reserving 100
// USD cents of budget "evals" each.
func queueItems(t *testing.T, l *Ledger, n int) []PaidTaskRef {
	t.Helper()
	var refs []PaidTaskRef
	for i := range n {
		ep := alloc(t, l, "evals", fmt.Sprintf("k%d", i), "2026-W32", 0).Episode
		r := paidRef(ep, "score", 0)
		if _, err := l.WriteIntentReserving(ctxT(t), r, testKey(r), BatchQueue, []Reservation{usd("evals", "2026-W32", 1_000_000, 100)}); err != nil {
			t.Fatalf("queue %s: %v", describe(r), err)
		}
		refs = append(refs, r)
	}
	return refs
}

func mustOpenBatch(t *testing.T, l *Ledger, key string, refs ...PaidTaskRef) PaidBatch {
	t.Helper()
	b, skips, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: key, Vendor: "llm", Kind: "score", Items: refs})
	if err != nil || len(skips) > 0 {
		t.Fatalf("OpenBatch(%s) = %v, %v", key, skips, err)
	}
	return b
}

func mustCreatedBatch(t *testing.T, l *Ledger, key, id string, refs ...PaidTaskRef) PaidBatch {
	t.Helper()
	mustOpenBatch(t, l, key, refs...)
	if _, err := l.BeginBatchCreate(ctxT(t), key, t0, sendUntil, 0); err != nil {
		t.Fatal(err)
	}
	b, err := l.RecordBatchCreated(ctxT(t), key, id, "in_progress", t0.Add(30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func taskEntriesT(t *testing.T, l *Ledger, r PaidTaskRef) []BudgetEntry {
	t.Helper()
	es, err := l.taskEntries(ctxT(t), l.r, r)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func testBatchLifecycle(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 3)
	// A task an attempt owns is not the queue's: a batch never takes it.
	direct := paidRef(alloc(t, l, "evals", "direct", "2026-W32", 0).Episode, "score", 0)
	mustIntent(t, l, direct)

	b, skips, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: "b1", Vendor: "llm", Kind: "score", Items: append([]PaidTaskRef{direct}, refs...)})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != allot.BatchOpen || len(b.Items) != 3 || b.MaybeSent || b.VendorBatchID != "" {
		t.Fatalf("opened: %+v", b)
	}
	if len(skips) != 1 || skips[0].Ref != direct {
		t.Fatalf("skips = %+v, want only the directly owned task", skips)
	}
	if got := mustPaidTask(t, l, direct); got.Owner != testOwner {
		t.Fatalf("the direct task's owner became %q", got.Owner)
	}
	for _, r := range refs {
		if got := mustPaidTask(t, l, r); got.Owner != BatchOwner("b1") || got.MaybeSent || got.State != allot.PaidIntent {
			t.Fatalf("after OpenBatch: %+v", got)
		}
	}
	// A retry gets the batch as stored.
	if again := mustOpenBatch(t, l, "b1", refs[0]); len(again.Items) != 3 {
		t.Fatalf("OpenBatch again = %+v", again)
	}

	if b, err = l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); err != nil || !b.MaybeSent || !b.SendingUntil.Equal(sendUntil) {
		t.Fatalf("BeginBatchCreate = %+v, %v", b, err)
	}
	for _, r := range refs {
		if got := mustPaidTask(t, l, r); !got.OutcomeUnknown() || got.FirstSentAt.IsZero() || !got.SendingUntil.Equal(sendUntil) {
			t.Fatalf("an item of a batch being created is not maybe-sent: %+v", got)
		}
	}
	if b, err = l.RecordBatchCreated(ctxT(t), "b1", "batch_1", "in_progress", t0.Add(30*24*time.Hour)); err != nil ||
		b.State != allot.BatchCreated || b.VendorBatchID != "batch_1" || b.MaybeSent || b.Status != "in_progress" {
		t.Fatalf("RecordBatchCreated = %+v, %v", b, err)
	}
	if _, err := l.EndBatch(ctxT(t), "b1", "completed"); !errors.Is(err, ErrBatchState) {
		t.Fatalf("EndBatch with items unsettled = %v, want ErrBatchState", err)
	}

	ok := BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemSucceeded, RemoteRef: "task_a", Amount: 40, Currency: "USD", Artifact: "/a/0.json", SHA256: "sha-a"}
	for range 2 { // once, however often
		got, _, err := l.SettleBatchItem(ctxT(t), "b1", ok)
		if err != nil || got.State != allot.PaidSucceeded || got.RemoteRef != "task_a" || got.SHA256 != "sha-a" || got.Owner != "" || got.MaybeSent {
			t.Fatalf("settle succeeded = %+v, %v", got, err)
		}
	}
	if total := costTotal(mustCosts(t, l, "evals", "2026-W32")); total != 40 {
		t.Fatalf("costs after settling one item twice = %d, want 40", total)
	}
	if es := taskEntriesT(t, l, refs[0]); len(es) != 1 || es[0].State != EntrySettled || es[0].Settled != 40 {
		t.Fatalf("the succeeded item's reservation did not become its cost: %+v", es)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemNotProcessed}); !errors.Is(err, ErrBatchState) {
		t.Fatalf("settling a settled item otherwise = %v, want ErrBatchState", err)
	}

	if got, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[1], Outcome: allot.BatchItemFailed, RemoteRef: "task_b", Error: "bad input"}); err != nil ||
		got.State != allot.PaidFailed || got.Error != "bad input" {
		t.Fatalf("settle failed = %+v, %v", got, err)
	}
	if es := taskEntriesT(t, l, refs[1]); len(es) != 1 || es[0].Settled != 0 {
		t.Fatalf("a failed item still holds budget: %+v", es)
	}

	np, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[2], Outcome: allot.BatchItemNotProcessed, Error: "expired"})
	if err != nil || np.State != allot.PaidIntent || np.Owner != BatchQueue || np.MaybeSent {
		t.Fatalf("settle not processed = %+v, %v", np, err)
	}
	if es := taskEntriesT(t, l, refs[2]); len(es) != 1 || es[0].State != EntryHeld || es[0].Reserved != 100 {
		t.Fatalf("a not-processed item lost its reservation: %+v", es)
	}

	if b, err = l.EndBatch(ctxT(t), "b1", "expired"); err != nil || b.State != allot.BatchEnded || b.Status != "expired" || b.Settled() != 3 {
		t.Fatalf("EndBatch = %+v, %v", b, err)
	}
	// The item that was not processed goes into the next batch, under its
	// same key.
	b2 := mustCreatedBatch(t, l, "b2", "batch_2", refs[2])
	if len(b2.Items) != 1 || mustPaidTask(t, l, refs[2]).IdempotencyKey != testKey(refs[2]) {
		t.Fatalf("second batch: %+v", b2)
	}
	if un, err := l.UnendedBatches(ctxT(t)); err != nil || len(un) != 1 || un[0].Key != "b2" {
		t.Fatalf("UnendedBatches = %+v, %v", un, err)
	}
	if bs, err := l.TaskBatches(ctxT(t), refs[2]); err != nil || len(bs) != 2 || bs[0].Key != "b1" || bs[1].Key != "b2" {
		t.Fatalf("TaskBatches of the item sent twice = %+v, %v; want b1 then b2", bs, err)
	}
}

func testBatchUnknownCreateLooksOnly(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 2)
	mustOpenBatch(t, l, "b1", refs...)
	if _, err := l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); err != nil {
		t.Fatal(err)
	}
	window := t0.Add(time.Hour)
	b, err := l.RecordBatchUnknown(ctxT(t), "b1", window, "the create got no answer")
	if err != nil || b.State != allot.BatchOpen || !b.MaybeSent || !b.LookOnlyUntil.Equal(normTime(window)) {
		t.Fatalf("RecordBatchUnknown = %+v, %v", b, err)
	}
	before := b
	if _, err := l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); !errors.Is(err, ErrBatchLookOnly) {
		t.Fatalf("BeginBatchCreate in the look-only window = %v, want ErrBatchLookOnly", err)
	}
	if after, err := l.Batch(ctxT(t), "b1"); err != nil || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Error != before.Error {
		t.Fatalf("a refused create changed the batch: %+v, %v", after, err)
	}
	// An earlier window never shortens the one recorded.
	if b, err = l.RecordBatchUnknown(ctxT(t), "b1", t0, "again"); err != nil || !b.LookOnlyUntil.Equal(normTime(window)) {
		t.Fatalf("a second unknown outcome moved the window: %+v, %v", b, err)
	}
	// Once the window has passed, a create may be tried again (the client
	// looks for the key first).
	if b, err = l.BeginBatchCreate(ctxT(t), "b1", window, window.Add(time.Minute), 0); err != nil || !b.MaybeSent {
		t.Fatalf("BeginBatchCreate after the window = %+v, %v", b, err)
	}
	// The vendor lists it after all: adopted.
	if b, err = l.RecordBatchCreated(ctxT(t), "b1", "batch_1", "in_progress", time.Time{}); err != nil || b.State != allot.BatchCreated {
		t.Fatalf("adopting the listed batch = %+v, %v", b, err)
	}
	if _, err := l.RecordBatchCreated(ctxT(t), "b1", "batch_2", "in_progress", time.Time{}); !errors.Is(err, ErrRemoteRefConflict) {
		t.Fatalf("another vendor batch for the key = %v, want ErrRemoteRefConflict", err)
	}
	for _, r := range refs {
		if got := mustPaidTask(t, l, r); !got.OutcomeUnknown() || got.Owner != BatchOwner("b1") {
			t.Fatalf("an item of a created batch before its results: %+v", got)
		}
	}
}

func testBatchNotCreatedReturnsItems(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 2)
	mustOpenBatch(t, l, "b1", refs...)
	if _, err := l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); err != nil {
		t.Fatal(err)
	}
	b, err := l.RecordBatchNotCreated(ctxT(t), "b1", "400 invalid_request: duplicate custom_id")
	if err != nil || b.State != allot.BatchNotCreated || b.MaybeSent || b.Settled() != 2 {
		t.Fatalf("RecordBatchNotCreated = %+v, %v", b, err)
	}
	for _, r := range refs {
		if got := mustPaidTask(t, l, r); got.Owner != BatchQueue || got.MaybeSent || got.State != allot.PaidIntent {
			t.Fatalf("an item of a refused batch did not go back to the queue: %+v", got)
		}
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); !errors.Is(err, ErrBatchState) {
		t.Fatalf("creating a refused batch again = %v, want ErrBatchState", err)
	}
	mustCreatedBatch(t, l, "b2", "batch_2", refs...)
}

func testBatchResultLostParks(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 1)
	mustCreatedBatch(t, l, "b1", "batch_1", refs...)
	got, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemResultLost, Error: "output file gone"})
	if err != nil || !got.OutcomeUnknown() {
		t.Fatalf("a lost item = %+v, %v; want a parked maybe-sent intent", got, err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemSucceeded, RemoteRef: "t", Amount: 1, Currency: "USD", Artifact: "a", SHA256: "s"}); !errors.Is(err, ErrBatchState) {
		t.Fatalf("a lost item settled again = %v, want ErrBatchState", err)
	}
	// A queued intent whose send may have reached the vendor (a send of
	// the queue's own, imported data) is settled first, never batched.
	queuedSent := queueItems(t, l, 2)[1]
	if _, err := l.MarkSending(ctxT(t), queuedSent, BatchQueue, sendUntil); err != nil {
		t.Fatal(err)
	}
	if _, skips, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: "b3", Vendor: "llm", Kind: "score", Items: []PaidTaskRef{queuedSent}}); !errors.Is(err, ErrNothingToBatch) ||
		len(skips) != 1 || !strings.Contains(skips[0].Why, "may have reached the vendor") {
		t.Fatalf("batching a maybe-sent queued intent = %v, %v; want ErrNothingToBatch", skips, err)
	}
	// Parked, it is never batched again by itself.
	if _, skips, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: "b2", Vendor: "llm", Kind: "score", Items: refs}); !errors.Is(err, ErrNothingToBatch) || len(skips) != 1 {
		t.Fatalf("batching a lost item again = %v, %v; want ErrNothingToBatch", skips, err)
	}
	if _, err := l.Batch(ctxT(t), "b2"); !errors.Is(err, ErrBatchNotFound) {
		t.Fatalf("a refused OpenBatch wrote the batch: %v", err)
	}
}

func testBatchRefusals(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 2)
	for _, c := range []struct {
		name string
		in   OpenBatchInput
	}{
		{"no key", OpenBatchInput{Kind: "score", Items: refs}},
		{"no kind", OpenBatchInput{Key: "b", Items: refs}},
		{"no items", OpenBatchInput{Key: "b", Kind: "score"}},
		{"an item twice", OpenBatchInput{Key: "b", Kind: "score", Items: []PaidTaskRef{refs[0], refs[1], refs[0]}}},
	} {
		if _, _, err := l.OpenBatch(ctxT(t), c.in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: OpenBatch = %v, want ErrInvalidInput", c.name, err)
		}
	}
	if _, err := l.Batch(ctxT(t), "b"); !errors.Is(err, ErrBatchNotFound) {
		t.Fatalf("a refused OpenBatch wrote the batch: %v", err)
	}
	for _, r := range refs {
		if got := mustPaidTask(t, l, r); got.Owner != BatchQueue {
			t.Fatalf("a refused OpenBatch moved %s: %+v", describe(r), got)
		}
	}
	mustOpenBatch(t, l, "b1", refs[0])
	if _, _, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: "b1", Vendor: "other", Kind: "score", Items: refs[1:]}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a batch key reused for another vendor = %v, want ErrInvalidInput", err)
	}
	// Settling before the vendor made the batch, or an item it does not
	// carry, is refused.
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemNotProcessed}); !errors.Is(err, ErrBatchState) {
		t.Errorf("settling an item of an open batch = %v, want ErrBatchState", err)
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b1", t0, sendUntil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RecordBatchCreated(ctxT(t), "b1", "batch_1", "in_progress", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[1], Outcome: allot.BatchItemNotProcessed}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("settling an item the batch does not carry = %v, want ErrInvalidInput", err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: "done"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("an unknown outcome = %v, want ErrInvalidInput", err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemSucceeded, RemoteRef: "t"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a success without its result = %v, want ErrInvalidInput", err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemSucceeded, RemoteRef: "t",
		Amount: allot.MaxAmount + 1, Currency: "USD", Artifact: "a", SHA256: "s"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("an absurd cost = %v, want ErrInvalidInput", err)
	}
	if got := mustPaidTask(t, l, refs[0]); got.State != allot.PaidIntent || got.Owner != BatchOwner("b1") {
		t.Fatalf("refused settlements moved the item: %+v", got)
	}
	if _, err := l.Batch(ctxT(t), "missing"); !errors.Is(err, ErrBatchNotFound) {
		t.Errorf("Batch(missing) = %v, want ErrBatchNotFound", err)
	}
	// One vendor batch is one key's: another key cannot claim it.
	mustOpenBatch(t, l, "b2", refs[1])
	if _, err := l.RecordBatchCreated(ctxT(t), "b2", "batch_1", "in_progress", time.Time{}); !errors.Is(err, ErrRemoteRefConflict) {
		t.Errorf("a second key claiming vendor batch batch_1 = %v, want ErrRemoteRefConflict", err)
	}
}

// Two collectors open batches over the same queued items at once: each
// item ends up in exactly one of them.
func testBatchItemInOneBatch(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 6)
	var wg sync.WaitGroup
	got := make([]PaidBatch, 2)
	for i := range got {
		wg.Go(func() {
			b, _, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: fmt.Sprintf("c%d", i), Vendor: "llm", Kind: "score", Items: refs})
			if err != nil && !errors.Is(err, ErrNothingToBatch) {
				t.Error(err)
			}
			got[i] = b
		})
	}
	wg.Wait()
	seen := map[PaidTaskRef]string{}
	for _, b := range got {
		for _, it := range b.Items {
			if other, dup := seen[it.PaidTaskRef]; dup {
				t.Fatalf("%s is in batches %s and %s", describe(it.PaidTaskRef), other, b.Key)
			}
			seen[it.PaidTaskRef] = b.Key
			if owner := mustPaidTask(t, l, it.PaidTaskRef).Owner; owner != BatchOwner(b.Key) {
				t.Fatalf("%s is in batch %s but owned by %q", describe(it.PaidTaskRef), b.Key, owner)
			}
		}
	}
	if len(seen) != len(refs) {
		t.Fatalf("%d of %d items were batched", len(seen), len(refs))
	}
}

// A vendor's batch_max_queued_items caps the items of its batches that may
// be at the vendor and not ended: a create that would go over is refused
// with nothing marked; another vendor's batches do not count; an ended
// batch frees its room.
func testBatchQueueCap(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 8)
	mustCreatedBatch(t, l, "b1", "vb_1", refs[0:3]...)
	mustOpenBatch(t, l, "b2", refs[3:6]...)
	if _, err := l.BeginBatchCreate(ctxT(t), "b2", t0, sendUntil, 5); !errors.Is(err, ErrBatchQueueFull) || !strings.Contains(err.Error(), "batch_max_queued_items of 5") {
		t.Fatalf("a create over the vendor's queue = %v, want ErrBatchQueueFull naming the cap", err)
	}
	if b, err := l.Batch(ctxT(t), "b2"); err != nil || b.State != allot.BatchOpen || b.MaybeSent {
		t.Fatalf("a batch refused for a full queue: %+v, %v; want open and not maybe-sent", b, err)
	}
	for _, r := range refs[3:6] {
		if pt, err := l.PaidTask(ctxT(t), r); err != nil || pt.MaybeSent {
			t.Fatalf("an item of a batch refused for a full queue: %+v, %v; want it not maybe-sent", pt, err)
		}
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b2", t0, sendUntil, 6); err != nil {
		t.Fatalf("a create that fills the queue exactly = %v", err)
	}
	// Another vendor's queue is its own.
	if _, _, err := l.OpenBatch(ctxT(t), OpenBatchInput{Key: "b3", Vendor: "other", Kind: "score", Items: refs[6:7]}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b3", t0, sendUntil, 1); err != nil {
		t.Fatalf("another vendor's create = %v; the llm vendor's batches do not count", err)
	}
	// b1 and b2 (maybe-sent, not created yet) hold 6 of 6.
	mustOpenBatch(t, l, "b4", refs[7])
	if _, err := l.BeginBatchCreate(ctxT(t), "b4", t0, sendUntil, 6); !errors.Is(err, ErrBatchQueueFull) {
		t.Fatalf("a create while a maybe-sent batch holds the room = %v, want ErrBatchQueueFull", err)
	}
	for i, r := range refs[0:3] {
		if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: r, Outcome: allot.BatchItemFailed, RemoteRef: fmt.Sprintf("task_%d", i), Error: "bad input"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.EndBatch(ctxT(t), "b1", "completed"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b4", t0, sendUntil, 6); err != nil {
		t.Fatalf("a create once a batch ended = %v", err)
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b4", t0, sendUntil, -1); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a negative cap = %v, want ErrInvalidInput", err)
	}
}

// An item whose task an operator abandoned while its batch ran (a write
// from outside the episode): the batch still records the item's outcome
// and can end; the task stays abandoned, with no cost booked for it (a
// charge is the reconciler's to report). The other items settle as ever.
func testBatchItemAbandonedOutside(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 2)
	mustCreatedBatch(t, l, "b1", "vb_1", refs...)
	if _, _, err := l.Decide(ctxT(t), DecisionRequest{OperatorDecision: OperatorDecision{RequestID: "outside", Pipeline: refs[0].Pipeline, EpisodeID: refs[0].EpisodeID,
		Step: refs[0].Step, Action: allot.ActionAbandon, Reason: "abandoned from outside", By: "ops"}}); err != nil {
		t.Fatal(err)
	}
	got, added, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[0], Outcome: allot.BatchItemSucceeded, RemoteRef: "task_a", Amount: 50, Currency: "USD", Artifact: "/a", SHA256: "sha"})
	if err != nil || got.State != allot.PaidAbandoned || added != 0 {
		t.Fatalf("settling an item abandoned from outside = %+v, added %d, %v; want it left abandoned, nothing added", got, added, err)
	}
	if _, err := l.Cost(ctxT(t), "task_a"); !errors.Is(err, ErrCostNotFound) {
		t.Fatalf("the cost of an item abandoned from outside: %v, want none booked", err)
	}
	if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: refs[1], Outcome: allot.BatchItemSucceeded, RemoteRef: "task_b", Amount: 50, Currency: "USD", Artifact: "/b", SHA256: "sha"}); err != nil {
		t.Fatal(err)
	}
	b, err := l.EndBatch(ctxT(t), "b1", "completed")
	if err != nil || b.State != allot.BatchEnded || b.Items[0].Outcome == "" {
		t.Fatalf("EndBatch after an item abandoned from outside = %+v, %v; want ended with every item's outcome", b, err)
	}
	if pt, err := l.PaidTask(ctxT(t), refs[1]); err != nil || pt.State != allot.PaidSucceeded {
		t.Fatalf("the other item: %+v, %v; want succeeded", pt, err)
	}
}

// abandonOutside abandons r's task as an operator would from outside its
// episode (starter episode resolve against the ledger): its reservation
// is released.
func abandonOutside(t *testing.T, l *Ledger, r PaidTaskRef) {
	t.Helper()
	if _, _, err := l.Decide(ctxT(t), DecisionRequest{OperatorDecision: OperatorDecision{RequestID: "abandon-" + r.EpisodeID, Pipeline: r.Pipeline,
		EpisodeID: r.EpisodeID, Step: r.Step, Action: allot.ActionAbandon, Reason: "given up from outside", By: "ops"}}); err != nil {
		t.Fatal(err)
	}
}

func sentRefs(ts []PaidTask) []PaidTaskRef {
	var out []PaidTaskRef
	for _, pt := range ts {
		out = append(out, pt.PaidTaskRef)
	}
	return out
}

// An item whose task is abandoned after its batch opened and before the
// create is never sent: the create's transaction leaves it out of the
// tasks it returns for the request, marks it nothing, and records it
// not_processed on the batch; a retried create (its answer lost) carries
// the same items under the same key; the vendor's queue counts only what
// is sent; a batch left with nothing is not created.
func testBatchItemAbandonedBeforeCreate(t *testing.T, l *Ledger) {
	refs := queueItems(t, l, 8)
	one, capped, alone, unbegun := refs[0:3], refs[3:6], refs[6], refs[7]
	mustOpenBatch(t, l, "b1", one...)
	abandonOutside(t, l, one[0])
	if es := taskEntriesT(t, l, one[0]); len(es) != 1 || es[0].State != EntryReleased {
		t.Fatalf("the abandoned item's reservation: %+v, want released", es)
	}
	b, send, err := l.BeginBatchCreateItems(ctxT(t), "b1", t0, sendUntil, 0)
	if err != nil || b.State != allot.BatchOpen || !b.MaybeSent {
		t.Fatalf("BeginBatchCreateItems = %+v, %v; want open and maybe-sent", b, err)
	}
	if got := sentRefs(send); !slices.Equal(got, one[1:]) {
		t.Fatalf("the create carries %v, want only the items not abandoned %v", got, one[1:])
	}
	for _, pt := range send {
		if pt.IdempotencyKey != testKey(pt.PaidTaskRef) || !pt.OutcomeUnknown() || !pt.SendingUntil.Equal(sendUntil) {
			t.Fatalf("an item the create carries: %+v; want its key, maybe-sent until the create's deadline", pt)
		}
	}
	if got := mustPaidTask(t, l, one[0]); got.State != allot.PaidAbandoned || got.MaybeSent || !got.FirstSentAt.IsZero() {
		t.Fatalf("the abandoned item after the create began: %+v; want abandoned, never marked sent", got)
	}
	if b.Items[0].PaidTaskRef != one[0] || b.Items[0].Outcome != allot.BatchItemNotProcessed || b.Items[1].Outcome != "" || b.Items[2].Outcome != "" {
		t.Fatalf("the batch's items: %+v; want the abandoned one recorded not_processed, the others unsettled", b.Items)
	}

	// The answer is lost; an item is abandoned now, after the create
	// began: it may be at the vendor under the key already, so the retry
	// once the look-only window has passed carries the same items.
	window := t0.Add(time.Hour)
	if _, err := l.RecordBatchUnknown(ctxT(t), "b1", window, "no answer"); err != nil {
		t.Fatal(err)
	}
	abandonOutside(t, l, one[1])
	if _, again, err := l.BeginBatchCreateItems(ctxT(t), "b1", window, window.Add(time.Minute), 0); err != nil || !slices.Equal(sentRefs(again), one[1:]) {
		t.Fatalf("the retried create carries %v, %v; want the first create's %v", sentRefs(again), err, one[1:])
	}
	if _, err := l.RecordBatchCreated(ctxT(t), "b1", "vb_1", "in_progress", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range one[1:] {
		if _, _, err := l.SettleBatchItem(ctxT(t), "b1", BatchItemSettlement{Ref: r, Outcome: allot.BatchItemSucceeded, RemoteRef: fmt.Sprintf("task_%d", i),
			Amount: 50, Currency: "USD", Artifact: "/a", SHA256: "sha"}); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := l.EndBatch(ctxT(t), "b1", "completed"); err != nil || b.State != allot.BatchEnded {
		t.Fatalf("EndBatch = %+v, %v", b, err)
	}
	if got := mustPaidTask(t, l, one[0]); got.State != allot.PaidAbandoned || got.MaybeSent {
		t.Fatalf("the item left out, once its batch ended: %+v", got)
	}

	// The vendor's queue counts what is sent: three items, one abandoned,
	// fit a cap of 2; the one left out takes no room from the next batch.
	mustOpenBatch(t, l, "b2", capped...)
	abandonOutside(t, l, capped[0])
	if _, send, err := l.BeginBatchCreateItems(ctxT(t), "b2", t0, sendUntil, 2); err != nil || len(send) != 2 {
		t.Fatalf("a create sending 2 items under a cap of 2 = %d items, %v", len(send), err)
	}
	mustOpenBatch(t, l, "b3", alone)
	if _, err := l.BeginBatchCreate(ctxT(t), "b3", t0, sendUntil, 3); err != nil {
		t.Fatalf("a create of 1 item beside 2 sent under a cap of 3 = %v: the item left out is counted", err)
	}
	if _, err := l.RecordBatchNotCreated(ctxT(t), "b3", "400 refused"); err != nil {
		t.Fatal(err)
	}

	// A batch whose every item was abandoned is not created, with why.
	mustOpenBatch(t, l, "b4", alone)
	abandonOutside(t, l, alone)
	b, send, err = l.BeginBatchCreateItems(ctxT(t), "b4", t0, sendUntil, 0)
	if err != nil || len(send) != 0 || b.State != allot.BatchNotCreated || b.MaybeSent || !strings.Contains(b.Error, "nothing to send") ||
		b.Settled() != 1 || b.Items[0].Outcome != allot.BatchItemNotProcessed {
		t.Fatalf("the create of a batch with every item abandoned = %+v, %d items, %v; want not_created, nothing sent, the item not_processed", b, len(send), err)
	}
	if got := mustPaidTask(t, l, alone); got.State != allot.PaidAbandoned || got.MaybeSent {
		t.Fatalf("the lone abandoned item: %+v", got)
	}
	if _, err := l.BeginBatchCreate(ctxT(t), "b4", t0, sendUntil, 0); !errors.Is(err, ErrBatchState) {
		t.Fatalf("creating a batch left with nothing again = %v, want ErrBatchState", err)
	}
	// An unknown outcome needs a create that began.
	mustOpenBatch(t, l, "b5", unbegun)
	if _, err := l.RecordBatchUnknown(ctxT(t), "b5", window, "no answer"); !errors.Is(err, ErrBatchState) {
		t.Fatalf("an unknown outcome of a create that never began = %v, want ErrBatchState", err)
	}
}
