package ledger

// A randomized, model-based test of the batch state machine (batches.go),
// registered in runConformance so that both drivers run it as
// Test{SQLite,Postgres}Conformance/BatchStateMachineModel. Seeds and length
// as for the paid-task model (paid_model_test.go: -ledger.seed,
// ALLOT_LEDGER_MODEL_SEED, _STEPS, _RUNS).
//
// From a seed it applies random calls (OpenBatch over random items,
// BeginBatchCreateItems inside and after the look-only window,
// RecordBatchCreated with the batch's ID or another, RecordBatchUnknown,
// RecordBatchNotCreated, SettleBatchItem with every outcome, again and
// otherwise, EndBatch, and an operator's abandon from outside, mostly of
// an item whose batch is open and not yet created) to batches over twelve
// queued items (an abandoned one is replaced by a new one), and after
// every call checks:
//
//   - a refused call wrote nothing (every task, batch and cost as before);
//   - every move of a batch is one batchMoves lists; an item's outcome,
//     once recorded, never changes, and a batch's vendor ID never changes;
//   - each task is carried (unsettled) by at most one unended batch, and its
//     intent is owned by that batch; a task owned by the queue is carried by
//     none; a lost item stays owned by its batch and maybe-sent;
//   - the items of a batch whose create began are maybe-sent until settled;
//   - an abandoned item is never in a create: the first create of a batch
//     carries exactly its unsettled items that are still its intents, and
//     records the others not_processed (a batch left with none is
//     not_created); a later create carries the first one's items again;
//   - an ended batch has every item settled;
//   - the cost entries are exactly the succeeded items' amounts, once each.

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

type batchModelSnapshot struct {
	tasks   map[PaidTaskRef]PaidTask
	batches map[string]PaidBatch
	costs   map[string]CostEntry
}

func testBatchStateMachineModel(t *testing.T, l *Ledger) {
	seed, steps, runs := modelParams(t)
	for run := range runs {
		s := seed + int64(run)
		if !runBatchModel(t, l, s, steps) {
			return
		}
	}
}

func runBatchModel(t *testing.T, l *Ledger, seed int64, steps int) bool {
	t.Helper()
	ctx := ctxT(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6261746368))
	var refs []PaidTaskRef
	vendor := fmt.Sprintf("llm%d", seed) // a queue of its own: the runs share the ledger
	queueOne := func() {
		ep := alloc(t, l, fmt.Sprintf("bm%d", seed), fmt.Sprintf("k%d", len(refs)), "2026-W32", 0).Episode
		r := paidRef(ep, "score", 0)
		if _, err := l.WriteIntentReserving(ctx, r, testKey(r), BatchQueue, []Reservation{usd(fmt.Sprintf("bm%d", seed), "2026-W32", 1_000_000, 300)}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	for range 12 {
		queueOne()
	}
	var (
		keys     []string
		trace    []string
		outcomes = map[string]allot.BatchItemOutcome{} // key + ref -> outcome recorded
		ids      = map[string]string{}                 // key -> vendor batch ID once recorded
		paid     = map[string]int64{}                  // remote ref -> amount of a succeeded item
		sent     = map[string][]PaidTaskRef{}          // key -> the items its first create carried
		// key -> the items abandoned while the batch was open and no
		// create of it had begun: never in a create of it
		abandonedBefore = map[string]map[PaidTaskRef]bool{}
		clock           = t0
	)
	fail := func(format string, args ...any) bool {
		from := max(0, len(trace)-12)
		t.Errorf("seed %d (rerun with -ledger.seed=%d), after %d calls: %s\nlast calls:\n  %s",
			seed, seed, len(trace), fmt.Sprintf(format, args...), strings.Join(trace[from:], "\n  "))
		return false
	}
	snap := func() batchModelSnapshot {
		s := batchModelSnapshot{tasks: map[PaidTaskRef]PaidTask{}, batches: map[string]PaidBatch{}, costs: map[string]CostEntry{}}
		for _, r := range refs {
			s.tasks[r] = mustPaidTask(t, l, r)
		}
		for _, k := range keys {
			b, err := l.Batch(ctx, k)
			if err == nil {
				s.batches[k] = b
			}
		}
		cs, err := l.Costs(ctx, refs[0].Pipeline, "2026-W32")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			s.costs[c.RemoteRef] = c
		}
		return s
	}
	prev := snap()
	// Mostly a batch still in play, sometimes any, rarely none.
	pickKey := func() string {
		var live []string
		for _, k := range keys {
			if b, ok := prev.batches[k]; ok && (b.State == allot.BatchOpen || b.State == allot.BatchCreated) {
				live = append(live, k)
			}
		}
		switch {
		case len(keys) == 0 || rng.IntN(12) == 0:
			return "missing"
		case len(live) > 0 && rng.IntN(5) > 0:
			return live[rng.IntN(len(live))]
		}
		return keys[rng.IntN(len(keys))]
	}
	for step := range steps {
		clock = clock.Add(time.Minute)
		var (
			call string
			err  error
		)
		switch op := rng.IntN(10); op {
		case 0, 1:
			key := fmt.Sprintf("b%d-%d", seed, len(keys))
			if rng.IntN(6) == 0 && len(keys) > 0 {
				key = keys[rng.IntN(len(keys))] // a retry, or a reused key
			}
			var items []PaidTaskRef
			for _, r := range refs {
				if rng.IntN(2) == 0 {
					items = append(items, r)
				}
			}
			call = fmt.Sprintf("OpenBatch(%s, %d items)", key, len(items))
			_, _, err = l.OpenBatch(ctx, OpenBatchInput{Key: key, Vendor: vendor, Kind: "score", Items: items})
			if err == nil && !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		case 2:
			key := pickKey()
			// Often the create of a batch with an item abandoned since it
			// opened, or a create again after a lost answer.
			for _, k := range keys {
				if b, ok := prev.batches[k]; ok && b.State == allot.BatchOpen && (b.MaybeSent || len(abandonedBefore[k]) > 0) && rng.IntN(3) == 0 {
					key = k
				}
			}
			at := clock
			if b, ok := prev.batches[key]; ok && !b.LookOnlyUntil.IsZero() {
				if rng.IntN(2) == 0 {
					at = b.LookOnlyUntil.Add(-time.Second) // inside the window
				} else if at.Before(b.LookOnlyUntil) {
					at = b.LookOnlyUntil // once it has passed
				}
			}
			// Mostly under a queue cap the batches' sizes reach.
			queueCap := []int{0, 4, 6, 8}[rng.IntN(4)]
			call = fmt.Sprintf("BeginBatchCreateItems(%s, at %s, cap %d)", key, at.Format(time.TimeOnly), queueCap)
			var (
				nb   PaidBatch
				send []PaidTask
			)
			nb, send, err = l.BeginBatchCreateItems(ctx, key, at, clock.Add(time.Minute), queueCap)
			b, ok := prev.batches[key]
			if !ok || b.State != allot.BatchOpen || at.Before(b.LookOnlyUntil) {
				break
			}
			// What the create is to carry: on the first, the unsettled
			// items still the batch's intents; on a later one, the first's.
			var want []PaidTaskRef
			for _, it := range b.Items {
				task := prev.tasks[it.PaidTaskRef]
				if it.Outcome == "" && task.State == allot.PaidIntent && task.Owner == BatchOwner(key) {
					want = append(want, it.PaidTaskRef)
				}
			}
			if b.MaybeSent {
				want = sent[key]
			}
			// The vendor's queue: the unsettled items of its other batches
			// that may be at the vendor. A create that had not begun goes
			// only if what it sends fits, and is refused only if not; one
			// with nothing to send needs no room.
			if queueCap > 0 && !b.MaybeSent {
				queued := 0
				for k, o := range prev.batches {
					if k != key && (o.State == allot.BatchCreated || o.State == allot.BatchOpen && o.MaybeSent) {
						queued += len(o.Items) - o.Settled()
					}
				}
				fits := len(want) == 0 || queued+len(want) <= queueCap
				switch {
				case err == nil && !fits:
					return fail("batch %s's create began with %d items to send while the vendor's queue held %d of %d", key, len(want), queued, queueCap)
				case errors.Is(err, ErrBatchQueueFull) && fits:
					return fail("batch %s's create was refused for a full queue, yet %d items fit beside %d in %d", key, len(want), queued, queueCap)
				}
			}
			if err != nil {
				break
			}
			var got []PaidTaskRef
			for _, pt := range send {
				got = append(got, pt.PaidTaskRef)
				if abandonedBefore[key][pt.PaidTaskRef] {
					return fail("batch %s's create carries %s, abandoned before any create of it began", key, pt.EpisodeID)
				}
			}
			if !slices.Equal(got, want) {
				return fail("batch %s's create carries %v, want %v", key, got, want)
			}
			if !b.MaybeSent {
				sent[key] = got
				for _, it := range nb.Items {
					if !slices.Contains(got, it.PaidTaskRef) && it.Outcome != allot.BatchItemNotProcessed {
						return fail("batch %s's create left %s out without recording it not_processed", key, it.EpisodeID)
					}
				}
				if (len(got) == 0) != (nb.State == allot.BatchNotCreated) {
					return fail("batch %s's create carries %d items and left the batch %s", key, len(got), nb.State)
				}
			}
		case 3:
			key := pickKey()
			id := "vb-" + key
			if rng.IntN(5) == 0 {
				id = "vb-other"
			}
			call = fmt.Sprintf("RecordBatchCreated(%s, %s)", key, id)
			_, err = l.RecordBatchCreated(ctx, key, id, "in_progress", time.Time{})
		case 4:
			key := pickKey()
			// Mostly a create under way, so that creates are retried.
			for _, k := range keys {
				if b, ok := prev.batches[k]; ok && b.State == allot.BatchOpen && b.MaybeSent && rng.IntN(2) == 0 {
					key = k
				}
			}
			call = fmt.Sprintf("RecordBatchUnknown(%s)", key)
			_, err = l.RecordBatchUnknown(ctx, key, clock.Add(time.Duration(rng.IntN(3))*time.Hour), "no answer")
		case 5:
			key := pickKey()
			call = fmt.Sprintf("RecordBatchNotCreated(%s)", key)
			_, err = l.RecordBatchNotCreated(ctx, key, "400 refused")
		case 6, 7:
			key := pickKey()
			r := refs[rng.IntN(len(refs))]
			if b, ok := prev.batches[key]; ok && len(b.Items) > 0 && rng.IntN(4) > 0 {
				r = b.Items[rng.IntN(len(b.Items))].PaidTaskRef
			}
			// Mostly not processed, so that items come back for other
			// batches; the final outcomes less often.
			o := []allot.BatchItemOutcome{allot.BatchItemSucceeded, allot.BatchItemFailed, allot.BatchItemNotProcessed, allot.BatchItemNotProcessed,
				allot.BatchItemNotProcessed, allot.BatchItemResultLost}[rng.IntN(6)]
			s := BatchItemSettlement{Ref: r, Outcome: o, Error: "why"}
			if o == allot.BatchItemSucceeded || o == allot.BatchItemFailed {
				s.RemoteRef = fmt.Sprintf("t-%s-%s", key, r.EpisodeID)
			}
			if o == allot.BatchItemSucceeded {
				s.Amount, s.Currency, s.Artifact, s.SHA256 = int64(100+rng.IntN(50)), "USD", "/a", "sha"
			}
			call = fmt.Sprintf("SettleBatchItem(%s, %s, %s)", key, r.EpisodeID, o)
			_, _, err = l.SettleBatchItem(ctx, key, s)
			// An abandoned task stays so, and books no cost.
			if err == nil && o == allot.BatchItemSucceeded && prev.tasks[r].State != allot.PaidAbandoned {
				if _, seen := paid[s.RemoteRef]; !seen {
					paid[s.RemoteRef] = s.Amount
				}
			}
		case 8:
			// An operator abandons a task from outside its episode; mostly
			// an item of an open batch (before its create or after).
			r := refs[rng.IntN(len(refs))]
			var before string
			for _, k := range keys { // in order: a seed replays the same calls
				if b, ok := prev.batches[k]; ok && b.State == allot.BatchOpen {
					for _, it := range b.Items {
						if it.Outcome == "" && prev.tasks[it.PaidTaskRef].State == allot.PaidIntent && (before == "" || rng.IntN(2) == 0) {
							r, before = it.PaidTaskRef, k
						}
					}
				}
			}
			if before != "" && rng.IntN(4) == 0 {
				r, before = refs[rng.IntN(len(refs))], ""
			}
			call = fmt.Sprintf("Abandon(%s)", r.EpisodeID)
			_, _, err = l.Decide(ctx, DecisionRequest{OperatorDecision: OperatorDecision{RequestID: fmt.Sprintf("abandon-%d-%d", seed, step), Pipeline: r.Pipeline,
				EpisodeID: r.EpisodeID, Step: r.Step, Action: allot.ActionAbandon, Reason: "given up", By: "ops"}})
			if err == nil {
				for k, b := range prev.batches {
					if b.State == allot.BatchOpen && !b.MaybeSent && slices.ContainsFunc(b.Items, func(it PaidBatchItem) bool { return it.PaidTaskRef == r && it.Outcome == "" }) {
						if abandonedBefore[k] == nil {
							abandonedBefore[k] = map[PaidTaskRef]bool{}
						}
						abandonedBefore[k][r] = true
					}
				}
				queueOne() // keep twelve tasks in play
			}
		default:
			key := pickKey()
			call = fmt.Sprintf("EndBatch(%s)", key)
			_, err = l.EndBatch(ctx, key, "completed")
		}
		if err != nil {
			call += " -> " + strings.SplitN(err.Error(), ":", 2)[0]
		}
		trace = append(trace, fmt.Sprintf("%d: %s", step, call))
		now := snap()
		if err != nil {
			if !maps.EqualFunc(prev.tasks, now.tasks, func(a, b PaidTask) bool { return a == b }) ||
				!maps.EqualFunc(prev.batches, now.batches, batchesEqual) || !maps.Equal(prev.costs, now.costs) {
				return fail("a refused call wrote something")
			}
			continue
		}
		for k, b := range now.batches {
			if was, ok := prev.batches[k]; ok && was.State != b.State && !slices.Contains(batchMoves[was.State], b.State) {
				return fail("batch %s moved %s -> %s, which batchMoves does not list", k, was.State, b.State)
			}
			if id, ok := ids[k]; ok && b.VendorBatchID != id {
				return fail("batch %s's vendor ID changed from %s to %s", k, id, b.VendorBatchID)
			}
			if b.VendorBatchID != "" {
				ids[k] = b.VendorBatchID
			}
			for _, it := range b.Items {
				id := k + "/" + it.EpisodeID
				if o, ok := outcomes[id]; ok && o != it.Outcome {
					return fail("item %s of batch %s was %s, now %s", it.EpisodeID, k, o, it.Outcome)
				}
				if it.Outcome != "" {
					outcomes[id] = it.Outcome
				}
			}
			if b.State == allot.BatchEnded && b.Settled() != len(b.Items) {
				return fail("batch %s ended with %d of %d items settled", k, b.Settled(), len(b.Items))
			}
		}
		carriedBy := map[PaidTaskRef]string{}
		for k, b := range now.batches {
			for _, it := range b.Items {
				if it.Outcome != "" || (b.State != allot.BatchOpen && b.State != allot.BatchCreated) {
					continue
				}
				if other, dup := carriedBy[it.PaidTaskRef]; dup {
					return fail("%s is carried by batches %s and %s", it.EpisodeID, other, k)
				}
				carriedBy[it.PaidTaskRef] = k
				task := now.tasks[it.PaidTaskRef]
				if task.State == allot.PaidAbandoned {
					continue // the operator's now: its batch records its outcome all the same
				}
				if task.State != allot.PaidIntent || task.Owner != BatchOwner(k) {
					return fail("%s is carried by batch %s but is %s owned by %q", it.EpisodeID, k, task.State, task.Owner)
				}
				if b.State == allot.BatchCreated || b.MaybeSent || !b.SendingUntil.IsZero() {
					if !task.MaybeSent {
						return fail("%s is in batch %s, whose create began, but is not maybe-sent", it.EpisodeID, k)
					}
				}
			}
		}
		for r, task := range now.tasks {
			switch {
			case task.Owner == BatchQueue && carriedBy[r] != "":
				return fail("%s is owned by the queue but carried by batch %s", r.EpisodeID, carriedBy[r])
			case strings.HasPrefix(task.Owner, "batch:") && task.State == allot.PaidIntent && carriedBy[r] == "":
				k := strings.TrimPrefix(task.Owner, "batch:")
				if outcomes[k+"/"+r.EpisodeID] != allot.BatchItemResultLost || !task.MaybeSent {
					return fail("%s is owned by batch %s, which does not carry it and did not lose it", r.EpisodeID, k)
				}
			}
		}
		if len(now.costs) != len(paid) {
			return fail("%d cost entries, want %d (one per succeeded item)", len(now.costs), len(paid))
		}
		for ref, amount := range paid {
			if c, ok := now.costs[ref]; !ok || c.Amount != amount {
				return fail("cost of %s is %+v, want %d", ref, c, amount)
			}
		}
		prev = now
	}
	return true
}

func batchesEqual(a, b PaidBatch) bool {
	return a.Key == b.Key && a.State == b.State && a.VendorBatchID == b.VendorBatchID && a.MaybeSent == b.MaybeSent &&
		a.SendingUntil.Equal(b.SendingUntil) && a.LookOnlyUntil.Equal(b.LookOnlyUntil) && a.Status == b.Status &&
		a.Error == b.Error && a.UpdatedAt.Equal(b.UpdatedAt) && slices.Equal(a.Items, b.Items)
}
