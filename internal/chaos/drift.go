package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
	"allot/pipeline"
)

// The default vendor's bill faults (vendorsim --bill-*). The small run's
// default vendor accepts some thirty tasks over four generations (it is
// restarted and killed), and each generation draws its faults from the
// seed's sequence anew: at 8 % each, the first ten draws of seed 1 plant
// one of each kind, and the bill stays mostly right. A phantom line per
// ten tasks (counted over every generation) plants a few. The strict and
// activity vendors' bills stay clean: any drift item on them is a
// violation.
const (
	billFaultRate     = 0.08
	billPhantomEvery  = 10
	driftAckBy        = "chaos"
	driftAckReason    = "chaos: a bill fault the simulated vendor planted"
	reconcileAheadBy  = 2 * time.Hour // past every vendor's grace: a dropped charge is drift by then
	driftItemsPerPage = 500
)

// plantedBill is what a vendor planted in its bill: what allot's own
// promises are checked without, and what the reconciler must find.
type plantedBill struct {
	faults []vendorapi.BillFault
	// byLine: the fault whose line it is (the phantom, the second, the
	// refund or the wrongly billed line).
	byLine map[string]vendorapi.BillFault
	// dropped: the tasks (by reference) whose charge was left off.
	dropped map[string]bool
}

func newPlantedBill(faults []vendorapi.BillFault) plantedBill {
	p := plantedBill{faults: faults, byLine: map[string]vendorapi.BillFault{}, dropped: map[string]bool{}}
	for _, f := range faults {
		if f.Kind == vendorapi.BillFaultMissing {
			p.dropped[f.TaskID] = true
			continue
		}
		p.byLine[f.LineID] = f
	}
	return p
}

// fair is the bill as it would be without the planted faults: the
// phantom, second and refund lines left out, a wrongly billed line at its
// task's true price (the ledger's cost, from costOf; a line whose task
// has no cost keeps its amount, for the checks to report). A dropped
// charge has no line to put back: its task is charged nothing here.
func (p plantedBill) fair(charges []paidvendor.Charge, costOf func(ref string) (allot.Money, bool)) []paidvendor.Charge {
	out := make([]paidvendor.Charge, 0, len(charges))
	for _, ch := range charges {
		f, planted := p.byLine[ch.ID]
		switch {
		case !planted:
		case f.Kind == vendorapi.BillFaultWrongAmount:
			if m, ok := costOf(ch.TaskID); ok {
				ch.Amount, ch.Currency = m.Amount, m.Currency
			}
		default:
			continue
		}
		out = append(out, ch)
	}
	return out
}

// driftKey names one drift item as the ledger keeps it: once per account,
// line and class.
type driftKey struct {
	account, line string
	class         allot.DriftClass
}

func (k driftKey) String() string {
	return fmt.Sprintf("%s on line %s", k.class, k.line)
}

// expectedDrift is the drift item each planted fault must produce on the
// account's bill. hasCost says whether the ledger books a cost for a task
// reference: a task whose submission the ledger recorded has one (written
// with its reference); one it never recorded (its send's answer lost, the
// episode parked with an unknown outcome and abandoned) has none, and
// then the reconciler can only call its wrongly billed line money spent
// without a record, and finds nothing uncharged for a dropped charge, as
// no cost waits for it. Those are what the ledger holds, so what is
// expected; a task with its cost is held to the exact class.
func expectedDrift(account string, p plantedBill, hasCost func(ref string) bool) map[driftKey]vendorapi.BillFault {
	out := map[driftKey]vendorapi.BillFault{}
	for _, f := range p.faults {
		k := driftKey{account: account, line: f.LineID}
		switch f.Kind {
		case vendorapi.BillFaultPhantom:
			k.class = allot.DriftUnrecorded
		case vendorapi.BillFaultDouble:
			k.class = allot.DriftDoubleCharge
		case vendorapi.BillFaultRefund:
			k.class = allot.DriftRefunded
		case vendorapi.BillFaultWrongAmount:
			k.class = allot.DriftAmountDiffers
			if !hasCost(f.TaskID) {
				k.class = allot.DriftUnrecorded
			}
		case vendorapi.BillFaultMissing:
			if !hasCost(f.TaskID) {
				continue
			}
			k.line, k.class = allot.DriftLineOfCost(f.TaskID), allot.DriftUncharged
		default:
			k.class = allot.DriftClass("unknown fault " + f.Kind)
		}
		out[k] = f
	}
	return out
}

// compareDrift matches the drift items found with those expected,
// exactly: every expected item found once, and no other. It returns what
// is missing and what was found without being planted, each sorted.
func compareDrift(expected map[driftKey]vendorapi.BillFault, found []ledger.DriftItem) (missing, unplanted []string) {
	seen := map[driftKey]bool{}
	for _, d := range found {
		k := driftKey{account: d.Account, line: d.Line, class: d.Class}
		if _, ok := expected[k]; !ok || seen[k] {
			unplanted = append(unplanted, fmt.Sprintf("vendor %s: drift item %d, %s (%s %s): %s", d.Vendor, d.ID, k, d.RemoteRef, allot.Money{Amount: d.Amount, Currency: d.Currency}, d.Detail))
		}
		seen[k] = true
	}
	for k, f := range expected {
		if !seen[k] {
			missing = append(missing, fmt.Sprintf("planted %s fault on task %s (key %s) has no drift item %s", f.Kind, f.TaskID, f.IdempotencyKey, k))
		}
	}
	sort.Strings(missing)
	sort.Strings(unplanted)
	return missing, unplanted
}

// billFaults reads what the default vendor planted in its bill.
func (r *run) readBillFaults(ctx context.Context) (plantedBill, error) {
	c, err := paidvendor.NewHTTPClient(r.vendor.url, r.vendor.key, nil)
	if err != nil {
		return plantedBill{}, err
	}
	var faults []vendorapi.BillFault
	if err := r.retry(ctx, time.Now().Add(30*time.Second), func(ctx context.Context) error {
		faults, err = c.BillFaults(ctx)
		return err
	}); err != nil {
		return plantedBill{}, fmt.Errorf("default vendor's bill faults: %w", err)
	}
	return newPlantedBill(faults), nil
}

// costOf is the run's ledger's cost of a task reference (r.led as it is
// when asked: checkDrift opens it again).
func (r *run) costOf(ctx context.Context) func(ref string) (allot.Money, bool) {
	return func(ref string) (allot.Money, bool) { return costIn(ctx, r.led, ref) }
}

// costIn is led's cost of a task reference. A ledger that cannot be read
// counts as no cost: the comparisons that follow then report the line.
func costIn(ctx context.Context, led *ledger.Ledger, ref string) (allot.Money, bool) {
	if ref == "" {
		return allot.Money{}, false
	}
	c, err := led.Cost(ctx, ref)
	if err != nil {
		return allot.Money{}, false
	}
	return allot.Money{Amount: c.Amount, Currency: c.Currency}, true
}

// checkDrift runs one reconciliation pass of the default vendor's bill in
// process, with the worker's own code and account (so it adds to the
// drift items the workers recorded), two hours ahead so every dropped
// charge is past its grace; then it holds every drift item of the ledger,
// of any vendor, against the planted faults, and acknowledges the planted
// ones, as an operator would, so that check reports only what was not.
func (r *run) checkDrift(ctx context.Context, sum *Summary, p plantedBill, bad func(string, ...any)) (err error) {
	c, err := paidvendor.NewHTTPClient(r.vendor.url, r.vendor.key, nil)
	if err != nil {
		return err
	}
	// The run reads the ledger read-only; the pass and the
	// acknowledgements write, beside the workers, as starter drift does.
	led, err := r.writableLedger(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := r.readOnlyAgain(ctx, led); err == nil {
			err = rerr
		}
	}()
	account := reconcile.Account(pipeline.DefaultVendor)
	rec := reconcile.Reconciler{Ledger: led, Pipelines: r.pipelines,
		Now: func() time.Time { return time.Now().Add(reconcileAheadBy) },
		Vendors: []reconcile.Vendor{{Name: pipeline.DefaultVendor, Names: []string{pipeline.DefaultVendor}, Account: account,
			Bill: c, Settings: r.pipelines.Bill(pipeline.DefaultVendor)}}}
	for _, res := range rec.Run(ctx) {
		if !res.Reconciled {
			bad("reconcile vendor %s: %s", res.Vendor, res.Reason)
		}
		if res.Pending > 0 {
			bad("reconcile vendor %s: %d lines still wait for their task's reference two hours on", res.Vendor, res.Pending)
		}
	}
	var found []ledger.DriftItem
	f := ledger.DriftFilter{Limit: driftItemsPerPage}
	for {
		items, err := led.DriftItems(ctx, f)
		if err != nil {
			return err
		}
		found = append(found, items...)
		if len(items) < driftItemsPerPage {
			break
		}
		f.AfterID = items[len(items)-1].ID
	}
	expected := expectedDrift(account, p, func(ref string) bool { _, ok := costIn(ctx, led, ref); return ok })
	missing, unplanted := compareDrift(expected, found)
	for _, m := range missing {
		bad("drift: %s", m)
	}
	for _, u := range unplanted {
		bad("drift not planted: %s", u)
	}
	sum.BillFaults, sum.DriftItems = len(p.faults), len(found)
	for _, d := range found {
		if _, ok := expected[driftKey{account: d.Account, line: d.Line, class: d.Class}]; !ok || !d.AckedAt.IsZero() {
			continue
		}
		if _, err := led.AckDrift(ctx, d.ID, driftAckBy, driftAckReason); err != nil {
			return fmt.Errorf("acknowledge drift item %d: %w", d.ID, err)
		}
	}
	return nil
}

// writableLedger closes the run's read-only ledger and opens it to write,
// so that this process holds the file through one set of connections
// (docs/design.md, "How allot opens a SQLite ledger").
func (r *run) writableLedger(ctx context.Context) (*ledger.Ledger, error) {
	if err := r.led.Close(); err != nil {
		return nil, fmt.Errorf("close the read-only ledger: %w", err)
	}
	led, err := ledger.OpenExisting(ctx, r.ledgerURL)
	if err != nil {
		return nil, fmt.Errorf("open the ledger to reconcile: %w", err)
	}
	return led, nil
}

// readOnlyAgain closes the writable ledger and opens the run's read-only
// one again, for the checks that follow and the operators that use it.
func (r *run) readOnlyAgain(ctx context.Context, led *ledger.Ledger) error {
	if err := led.Close(); err != nil {
		return fmt.Errorf("close the writable ledger: %w", err)
	}
	ro, err := ledger.OpenReadOnly(ctx, r.ledgerURL)
	if err != nil {
		return fmt.Errorf("open the ledger read-only again: %w", err)
	}
	r.led, r.commands.Ledger, r.scheds.Ledger = ro, ro, ro
	return nil
}

// fairLister lists a vendor's bill without its planted faults (fair), for
// the checks of allot's own promises (report.Audit).
type fairLister struct {
	c       *paidvendor.HTTPClient
	planted plantedBill
	costOf  func(ref string) (allot.Money, bool)
}

func (l fairLister) Charges(ctx context.Context) ([]paidvendor.Charge, error) {
	chs, err := l.c.Charges(ctx)
	if err != nil {
		return nil, err
	}
	return l.planted.fair(chs, l.costOf), nil
}

// chargedOverBudget reports whether a check violation is a budget period
// the raw bill charged over its limit only through a planted fault: a
// double charge or a wrong amount bills a covered task more than the
// ledger's cost, which check --vendor counts (the bill says more). The
// same check on the fair bill (report.Audit here) stays exact.
func (r *run) chargedOverBudget(ctx context.Context, p plantedBill, v ledger.Violation) bool {
	if v.Kind != ledger.KindBudgetExceeded {
		return false
	}
	for _, f := range p.faults {
		if f.Kind != vendorapi.BillFaultDouble && f.Kind != vendorapi.BillFaultWrongAmount {
			continue
		}
		t, _, ok, err := r.led.PaidTaskBilled(ctx, f.TaskID, f.IdempotencyKey)
		if err != nil || !ok {
			continue
		}
		pl, err := r.pipelines.Get(t.Pipeline)
		if err != nil {
			continue
		}
		st, ok := pl.Step(t.Step)
		if !ok {
			continue
		}
		ep, err := r.led.Episode(ctx, t.Pipeline, t.EpisodeID)
		if err != nil {
			continue
		}
		for _, b := range r.pipelines.Budgets() {
			if b.Covers(pl.Name, st) && strings.HasPrefix(v.Detail, fmt.Sprintf("budget %s period %s:", b.Name, b.PeriodOf(ep.NominalTime))) {
				return true
			}
		}
	}
	return false
}
