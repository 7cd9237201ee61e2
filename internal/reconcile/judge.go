// Package reconcile compares each vendor's bill with the ledger, line by
// line, and records every line the ledger cannot explain as a drift item
// (docs/design.md, "Reconciling the vendor's bill"). Judge is the one
// matcher: the worker's continuous reconciler (Reconciler) and starter
// check --vendor both ask it, so the two never disagree.
package reconcile

import (
	"fmt"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// Facts are what the ledger knows of one line of a vendor's bill.
type Facts struct {
	Vendor string // the vendor whose bill holds the line (as steps name it)
	Line   ledger.BillLine
	// Task is the paid task the line names, when Known: by the line's
	// task reference, else (ByKeyOnly) by its idempotency key.
	Task      ledger.PaidTask
	Known     bool
	ByKeyOnly bool
	Period    string // the period of Task's episode
	// Cost is what the ledger books for the line's task reference.
	Cost    ledger.CostEntry
	HasCost bool
	// Earlier is the ID of an earlier charge line of the same bill for
	// the same task; "" when none.
	Earlier string
	// InBatch: Task is an item of a vendor batch that has not ended. A
	// batch bills each item as it finishes, and the ledger records the
	// item's reference and cost when the batch ends, hours later.
	InBatch bool
}

// Verdict is what Judge makes of a line: explained (Class ""), a drift
// item of Class, or Pending: not judged yet, asked again next time.
type Verdict struct {
	Class   allot.DriftClass
	Pending bool
	Money   allot.Money // the money at stake
	Detail  string
}

// Judge explains one line of a bill from what the ledger knows of it, or
// says which drift it is. The order matters: a refund is a refund whoever
// it names; a line no task holds is money spent without a record; a
// second charge for a task is a double charge before its amount is read.
func Judge(f Facts, bill pipeline.VendorBill, now time.Time) Verdict {
	l := f.Line
	billed := allot.Money{Amount: l.Amount, Currency: l.Currency}
	who := "vendor " + f.Vendor
	task := fmt.Sprintf("task %q (idempotency key %q)", l.TaskRef, l.IdempotencyKey)
	switch {
	case l.Refund:
		d := fmt.Sprintf("%s refunded %s on line %s for %s", who, billed, l.LineID, task)
		if f.Known {
			d += ", which is " + describe(f.Task)
			if f.HasCost {
				d += fmt.Sprintf("; the ledger still books %s for it", allot.Money{Amount: f.Cost.Amount, Currency: f.Cost.Currency})
			}
		} else {
			d += ", which no paid task of the ledger holds"
		}
		return Verdict{Class: allot.DriftRefunded, Money: billed,
			Detail: d + ": find out why (a failed task, a dispute won), then acknowledge it with a reason"}

	case !f.Known:
		return Verdict{Class: allot.DriftUnrecorded, Money: billed,
			Detail: fmt.Sprintf("%s charged %s on line %s for %s, which no paid task of the ledger holds: money spent without a record; ask the vendor who submitted it under this account, then acknowledge it with a reason", who, billed, l.LineID, task)}

	case f.Earlier != "":
		return Verdict{Class: allot.DriftDoubleCharge, Money: billed,
			Detail: fmt.Sprintf("%s charged %s again on line %s for %s, %s, already charged on line %s: one task paid twice; dispute the second charge with the vendor, then acknowledge it with a reason", who, billed, l.LineID, task, describe(f.Task), f.Earlier)}

	case f.ByKeyOnly:
		// The ledger holds the task by its key but not under this
		// reference. While its send may still be answered, the reference
		// is on its way: wait, up to the vendor's grace; an item of a
		// batch still running waits for its batch, however long that
		// takes (its results are fetched before the vendor drops them,
		// and a batch that lost them ends, parking the item).
		if f.InBatch && f.Task.State == allot.PaidIntent {
			return Verdict{Pending: true}
		}
		if (f.Task.State == allot.PaidIntent || f.Task.State == allot.PaidPlanned) && now.Sub(since(l)) < bill.Grace() {
			return Verdict{Pending: true}
		}
		d := fmt.Sprintf("%s charged %s on line %s for %s, which is %s's key, but the ledger holds that task as %s", who, billed, l.LineID, task, describe(f.Task), f.Task.State)
		if f.Task.RemoteRef != "" {
			d += fmt.Sprintf(" under another reference (%q)", f.Task.RemoteRef)
		} else {
			d += " without this reference: the vendor accepted a submission whose answer was lost; " + allot.LookupCommand(f.Task.Pipeline, f.Task.EpisodeID, f.Task.Step) + " adopts it"
		}
		return Verdict{Class: allot.DriftUnrecorded, Money: billed, Detail: d}

	case !f.HasCost:
		if l.Amount == 0 {
			return Verdict{} // an effect step's task: no cost, no money
		}
		return Verdict{Class: allot.DriftUnrecorded, Money: billed,
			Detail: fmt.Sprintf("%s charged %s on line %s for %s, which is %s's reference, but the ledger books no cost for it: correct the ledger's cost to what was charged, or dispute the charge", who, billed, l.LineID, task, describe(f.Task))}

	case l.Currency != f.Cost.Currency:
		return Verdict{Class: allot.DriftAmountDiffers, Money: billed,
			Detail: fmt.Sprintf("%s charged %s on line %s for %s (%s), the ledger books %s: another currency; ask the vendor which is right", who, billed, l.LineID, task, describe(f.Task), allot.Money{Amount: f.Cost.Amount, Currency: f.Cost.Currency})}

	case l.Amount < 0 || l.Amount > allot.MaxAmount || f.Cost.Amount < 0 || f.Cost.Amount > allot.MaxAmount:
		// No vendor bills that; comparing would only overflow.
		return Verdict{Class: allot.DriftAmountDiffers, Money: billed,
			Detail: fmt.Sprintf("%s charged %d minor units of %s on line %s for %s (%s), the ledger books %s: one of them is outside 0..%s; ask the vendor which is right, then correct the ledger or dispute the charge",
				who, l.Amount, l.Currency, l.LineID, task, describe(f.Task), allot.Money{Amount: f.Cost.Amount, Currency: f.Cost.Currency}, allot.Money{Amount: allot.MaxAmount, Currency: l.Currency})}

	default:
		diff := l.Amount - f.Cost.Amount // both within 0..MaxAmount: no overflow
		if diff < 0 {
			diff = -diff
		}
		if diff <= bill.BillTolerance {
			return Verdict{}
		}
		return Verdict{Class: allot.DriftAmountDiffers, Money: allot.Money{Amount: diff, Currency: l.Currency},
			Detail: fmt.Sprintf("%s charged %s on line %s for %s (%s), the ledger books %s, %s apart (tolerance %s): ask the vendor which is right, then correct the ledger or dispute the charge",
				who, billed, l.LineID, task, describe(f.Task), allot.Money{Amount: f.Cost.Amount, Currency: f.Cost.Currency},
				allot.Money{Amount: diff, Currency: l.Currency}, allot.Money{Amount: bill.BillTolerance, Currency: l.Currency})}
	}
}

// JudgeUnbilled is the verdict on a cost the ledger books that no line of
// its vendor's bill names, once the vendor's grace has passed since it
// was recorded (the caller reads only those).
func JudgeUnbilled(vendor string, c ledger.UnbilledCost, bill pipeline.VendorBill) Verdict {
	booked := allot.Money{Amount: c.Amount, Currency: c.Currency}
	return Verdict{Class: allot.DriftUncharged, Money: booked,
		Detail: fmt.Sprintf("the ledger books %s for task %q (%s/%s step %s revision %d) under vendor %s, which has not charged for it within its bill_grace (%s): ask the vendor; correct the ledger if the task was never billed, or wait for the charge and acknowledge this with a reason",
			booked, c.RemoteRef, c.Pipeline, c.EpisodeID, c.Step, c.Revision, vendor, bill.Grace())}
}

// since is when a line's grace starts: when the vendor charged it, or, for
// a line without a time, when it was read.
func since(l ledger.BillLine) time.Time {
	if !l.ChargedAt.IsZero() {
		return l.ChargedAt
	}
	return l.ReadAt
}

func describe(t ledger.PaidTask) string {
	return fmt.Sprintf("%s/%s step %s revision %d", t.Pipeline, t.EpisodeID, t.Step, t.Revision)
}
