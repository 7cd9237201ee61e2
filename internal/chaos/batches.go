package chaos

import (
	"context"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// checkBatches holds chaos-batch to the batch promises (docs/design.md,
// "Batches", invariant 24) on what the run left: every batch ended (none
// open or created after the drain), every item of an ended batch has its
// outcome, every item that succeeded was charged exactly once under its
// own key at the ledger's cost (check's bill comparison covers every
// charge; here each is also tied to the batch that carried it), and every
// paid task of the pipeline went through a batch. An item a batch did not
// finish (expired, cancelled) is carried again by a later batch under the
// same key: such an item has several batches and still one charge.
func (r *run) checkBatches(ctx context.Context, sum *Summary, charges []paidvendor.Charge, bad func(string, ...any)) error {
	sum.BatchCharges = len(charges)
	chargesByKey := map[string]int{}
	for _, c := range charges {
		chargesByKey[c.IdempotencyKey]++
	}
	unended, err := r.led.UnendedBatches(ctx)
	if err != nil {
		return err
	}
	for _, b := range unended {
		bad("batch %s (vendor %q, vendor ID %q) is still %s after the drain: its %d items wait for ever", b.Key, b.Vendor, b.VendorBatchID, b.State, len(b.Items))
	}
	eps, err := r.led.ListEpisodes(ctx, PipelineBatch, "")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, ep := range eps {
		tasks, err := r.led.PaidTasks(ctx, PipelineBatch, ep.ID)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			batches, err := r.led.TaskBatches(ctx, t.PaidTaskRef)
			if err != nil {
				return err
			}
			if len(batches) == 0 {
				if t.State != allot.PaidAbandoned {
					bad("%s/%s step %s r%d is %s and no batch carried it: a batch step's task is sent in a batch", PipelineBatch, ep.ID, t.Step, t.Revision, t.State)
				}
				continue
			}
			sum.BatchItems++
			if len(batches) > 1 {
				sum.BatchItemsResent++
			}
			succeeded := 0
			for _, b := range batches {
				if !seen[b.Key] {
					seen[b.Key] = true
					countBatch(sum, b)
				}
				for _, it := range b.Items {
					if it.PaidTaskRef != t.PaidTaskRef {
						continue
					}
					if b.State == allot.BatchEnded && it.Outcome == "" {
						bad("batch %s ended, yet its item %s/%s step %s r%d has no outcome", b.Key, PipelineBatch, ep.ID, t.Step, t.Revision)
					}
					if it.Outcome == allot.BatchItemSucceeded {
						succeeded++
					}
				}
			}
			switch {
			case succeeded > 1:
				bad("%s/%s step %s r%d succeeded in %d batches: one item, one success", PipelineBatch, ep.ID, t.Step, t.Revision, succeeded)
			case succeeded == 1 && t.State != allot.PaidSucceeded:
				bad("%s/%s step %s r%d succeeded in its batch, yet the ledger holds it as %s", PipelineBatch, ep.ID, t.Step, t.Revision, t.State)
			case succeeded == 1 && chargesByKey[t.IdempotencyKey] != 1:
				bad("%s/%s step %s r%d succeeded in its batch and the batch vendor charged its key %d times, want 1", PipelineBatch, ep.ID, t.Step, t.Revision, chargesByKey[t.IdempotencyKey])
			}
		}
	}
	sum.Batches = len(seen)
	return nil
}

// countBatch adds a batch to the summary's batch figures: how it ended,
// and whether a create of it went unanswered (a look-only window was
// opened: the batch was then adopted from the vendor's list, or created
// after the window).
func countBatch(sum *Summary, b ledger.PaidBatch) {
	switch b.Status {
	case vendorapi.BatchExpired, vendorapi.BatchCancelled:
		sum.BatchesEndedEarly++
	}
	if !b.LookOnlyUntil.IsZero() {
		sum.BatchCreatesUnanswered++
	}
}
