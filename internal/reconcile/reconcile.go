package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// Vendor is one vendor account whose bill is reconciled.
type Vendor struct {
	// Name is the vendor as steps name it (pipeline.DefaultVendor for
	// the worker's default vendor); Names are every vendor that reads the
	// same bill (URL and key), Name first: a cost booked to any of them
	// belongs on this bill.
	Name  string
	Names []string
	// Account is what the ledger keeps the bill under: Account(Name).
	Account string
	// Bill reads the bill; nil when it cannot be read, and NotReconciled
	// says why: such a vendor is reported "not reconciled", never fine.
	Bill          paidvendor.BillReader
	NotReconciled string
	// Settings are its bill_grace and bill_tolerance.
	Settings pipeline.VendorBill
}

// Reconciler reads each vendor's bill from the ledger's watermark, page by
// page, stores the lines, judges each (Judge) and records what it cannot
// explain as drift items; then it records the costs no line billed within
// the vendor's grace. Every write is keyed (line ID, drift item per line
// and class, the watermark moved from where it was read), so any number of
// workers may run it at once and be killed at any point.
type Reconciler struct {
	Ledger *ledger.Ledger
	// Pipelines names the vendor of a cost whose episode has no pinned
	// plan (the step's vendor as configured now).
	Pipelines *pipeline.Set
	Vendors   []Vendor
	PageSize  int              // lines per page read and judged; 0: DefaultPageSize
	Now       func() time.Time // nil: time.Now
}

// DefaultPageSize is how many lines a reconciler asks for and judges at
// once: bounded memory whatever the bill's length.
const DefaultPageSize = 500

// Every is how often the worker reconciles its vendors' bills.
const Every = time.Minute

// Result is what one pass did with one vendor.
type Result struct {
	Vendor  string `json:"vendor"`
	Account string `json:"-"`
	// Reconciled is false when the bill could not be read: Reason says
	// why.
	Reconciled bool   `json:"reconciled"`
	Reason     string `json:"reason,omitempty"`
	NewLines   int    `json:"new_lines"`
	Judged     int    `json:"judged"`
	// Pending lines wait for their task's reference (within the grace).
	Pending int                `json:"pending"`
	Drift   []ledger.DriftItem `json:"drift,omitempty"` // recorded by this pass
	At      time.Time          `json:"at"`
}

// Run reconciles every vendor once. A vendor that fails is reported in
// its Result and does not stop the others.
func (r *Reconciler) Run(ctx context.Context) []Result {
	out := make([]Result, 0, len(r.Vendors))
	for _, v := range r.Vendors {
		res, err := r.Vendor(ctx, v)
		if err != nil {
			res.Reconciled, res.Reason = false, err.Error()
		}
		out = append(out, res)
	}
	return out
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) pageSize() int {
	if r.PageSize > 0 {
		return r.PageSize
	}
	return DefaultPageSize
}

// Vendor reconciles one vendor's bill: reads the new lines, judges every
// line not judged yet, then looks for costs it never billed.
func (r *Reconciler) Vendor(ctx context.Context, v Vendor) (Result, error) {
	res := Result{Vendor: v.Name, Account: v.Account, At: r.now()}
	if v.Bill == nil {
		res.Reason = v.NotReconciled
		if res.Reason == "" {
			res.Reason = "its adapter cannot list charges"
		}
		return res, nil
	}
	n, err := r.read(ctx, v)
	res.NewLines = n
	if err != nil {
		return res, fmt.Errorf("read the bill of vendor %s: %w", v.Name, err)
	}
	if err := r.judgeLines(ctx, v, &res); err != nil {
		return res, fmt.Errorf("judge the bill of vendor %s: %w", v.Name, err)
	}
	if err := r.judgeCosts(ctx, v, &res); err != nil {
		return res, fmt.Errorf("find costs vendor %s did not bill: %w", v.Name, err)
	}
	res.Reconciled = true
	return res, nil
}

// maxRaces bounds how often a reconciler starts over when another moved
// the watermark under it: each start reads from the newer one.
const maxRaces = 10

// read stores the bill's lines after the ledger's watermark, a page at a
// time, each page with the watermark it moves (one transaction).
func (r *Reconciler) read(ctx context.Context, v Vendor) (int, error) {
	added, races := 0, 0
	for {
		wm, err := r.Ledger.BillWatermark(ctx, v.Account)
		if err != nil {
			return added, err
		}
		page, err := v.Bill.ReadBill(ctx, paidvendor.ReadBillInput{After: wm.Cursor, Limit: r.pageSize()})
		if err != nil {
			return added, anotherAccount(ctx, v, wm, err)
		}
		lines := make([]ledger.BillLine, 0, len(page.Lines))
		for _, c := range page.Lines {
			lines = append(lines, ledger.BillLine{Account: v.Account, Vendor: v.Name, LineID: c.ID, TaskRef: c.TaskID,
				IdempotencyKey: c.IdempotencyKey, Refund: c.Refund, Amount: c.Amount, Currency: c.Currency, ChargedAt: c.At})
		}
		n, err := r.Ledger.RecordBillPage(ctx, ledger.BillPage{Account: v.Account, Vendor: v.Name, From: wm.Cursor, Next: page.Next, Lines: lines, VendorAccount: page.Account})
		switch {
		case errors.Is(err, ledger.ErrBillOfAnotherAccount):
			return added, fmt.Errorf("%w: %s", err, anotherAccountFix)
		case errors.Is(err, ledger.ErrBillWatermarkMoved):
			if races++; races > maxRaces {
				return added, err
			}
			continue
		case err != nil:
			return added, err
		}
		added += n
		if !page.HasMore || page.Next == wm.Cursor {
			return added, nil
		}
	}
}

// anotherAccountFix is the way out of a key that reads another account's
// bill than the one the ledger keeps under the vendor's name.
const anotherAccountFix = "its API key now reads the bill of another account: put back a key of the account the ledger's bill is of, or give the vendor of the other account a [[vendor]] name of its own in the pipeline file"

// anotherAccount explains a failed read from the watermark: a cursor the
// vendor does not know is what a key of another account meets first, so
// where the bill's account is known, the bill's first line says whether
// the key still reads it.
func anotherAccount(ctx context.Context, v Vendor, wm ledger.BillWatermark, readErr error) error {
	if wm.VendorAccount == "" || wm.Cursor == "" {
		return readErr
	}
	first, err := v.Bill.ReadBill(ctx, paidvendor.ReadBillInput{Limit: 1})
	if err != nil || first.Account == "" || first.Account == wm.VendorAccount {
		return readErr
	}
	return fmt.Errorf("%w: the bill of %s is of the vendor's account %q, and its key now reads account %q: %s",
		ledger.ErrBillOfAnotherAccount, v.Account, wm.VendorAccount, first.Account, anotherAccountFix)
}

// judgeLines judges every line of the account not judged yet, a page at
// a time, each page's verdicts in one transaction.
func (r *Reconciler) judgeLines(ctx context.Context, v Vendor, res *Result) error {
	var after int64
	for {
		lines, err := r.Ledger.UnjudgedBillLines(ctx, v.Account, after, r.pageSize())
		if err != nil {
			return err
		}
		var js []ledger.BillJudgement
		for _, l := range lines {
			after = l.Seq
			f, err := r.facts(ctx, v, l)
			if err != nil {
				return err
			}
			verdict := Judge(f, v.Settings, r.now())
			if verdict.Pending {
				res.Pending++
				continue
			}
			j := ledger.BillJudgement{LineID: l.LineID}
			if verdict.Class != "" {
				item := driftItem(v, f, verdict)
				j.Drift = &item
			}
			js = append(js, j)
		}
		if len(js) > 0 {
			recorded, err := r.Ledger.JudgeBillLines(ctx, v.Account, js)
			if err != nil {
				return err
			}
			res.Judged += len(js)
			for i, rec := range recorded {
				if rec {
					res.Drift = append(res.Drift, *js[i].Drift)
				}
			}
		}
		if len(lines) < r.pageSize() {
			return nil
		}
	}
}

// facts reads what the ledger knows of one line.
func (r *Reconciler) facts(ctx context.Context, v Vendor, l ledger.BillLine) (Facts, error) {
	f := Facts{Vendor: v.Name, Line: l}
	var err error
	if f.Task, f.ByKeyOnly, f.Known, err = r.Ledger.PaidTaskBilled(ctx, l.TaskRef, l.IdempotencyKey); err != nil || !f.Known {
		return f, err
	}
	ep, err := r.Ledger.Episode(ctx, f.Task.Pipeline, f.Task.EpisodeID)
	if err != nil {
		return f, err
	}
	f.Period = ep.Period
	if key, ok := ledger.BatchOfOwner(f.Task.Owner); ok && f.ByKeyOnly && f.Task.State == allot.PaidIntent {
		b, err := r.Ledger.Batch(ctx, key)
		if err != nil {
			return f, err
		}
		f.InBatch = b.State != allot.BatchEnded && b.State != allot.BatchNotCreated
	}
	if !l.Refund {
		if f.Earlier, err = r.Ledger.EarlierBillCharge(ctx, l); err != nil {
			return f, err
		}
	}
	if l.TaskRef != "" && !f.ByKeyOnly {
		c, err := r.Ledger.Cost(ctx, l.TaskRef)
		switch {
		case errors.Is(err, ledger.ErrCostNotFound):
		case err != nil:
			return f, err
		default:
			f.Cost, f.HasCost = c, true
		}
	}
	return f, nil
}

// judgeCosts records, once each, the costs booked to the account's
// vendors that no line of its bill names, recorded before the grace.
func (r *Reconciler) judgeCosts(ctx context.Context, v Vendor, res *Result) error {
	before := r.now().Add(-v.Settings.Grace())
	after := ""
	for {
		costs, err := r.Ledger.UnbilledCosts(ctx, v.Account, before, after, r.pageSize())
		if err != nil {
			return err
		}
		for _, c := range costs {
			after = c.RemoteRef
			if !slices.Contains(v.Names, VendorOfCost(r.Pipelines, c.AuditCost)) || c.Currency == "" {
				continue
			}
			verdict := JudgeUnbilled(v.Name, c, v.Settings)
			d, created, err := r.Ledger.RecordDrift(ctx, ledger.DriftItem{Account: v.Account, Vendor: v.Name, Line: allot.DriftLineOfCost(c.RemoteRef),
				Class: verdict.Class, Pipeline: c.Pipeline, EpisodeID: c.EpisodeID, Step: c.Step, Revision: c.Revision, Period: c.Period,
				RemoteRef: c.RemoteRef, IdempotencyKey: c.IdempotencyKey, Amount: verdict.Money.Amount, Currency: verdict.Money.Currency, Detail: verdict.Detail})
			if err != nil {
				return err
			}
			if created {
				res.Drift = append(res.Drift, d)
			}
		}
		if len(costs) < r.pageSize() {
			return nil
		}
	}
}

func driftItem(v Vendor, f Facts, verdict Verdict) ledger.DriftItem {
	d := ledger.DriftItem{Account: v.Account, Vendor: v.Name, Line: f.Line.LineID, Class: verdict.Class,
		RemoteRef: f.Line.TaskRef, IdempotencyKey: f.Line.IdempotencyKey,
		Amount: verdict.Money.Amount, Currency: verdict.Money.Currency, Detail: verdict.Detail}
	if f.Known {
		d.Pipeline, d.EpisodeID, d.Step, d.Revision, d.Period = f.Task.Pipeline, f.Task.EpisodeID, f.Task.Step, f.Task.Revision, f.Period
	}
	return d
}

// VendorOfCost is the vendor a cost is booked to: its step's vendor in the
// episode's pinned plan, else in the pipeline file as configured now
// (pipeline.DefaultVendor for the default one); "" when neither names it.
func VendorOfCost(set *pipeline.Set, c ledger.AuditCost) string {
	name, known := c.Vendor, c.StepKind != ""
	if !known && set != nil {
		if p, err := set.Get(c.Pipeline); err == nil {
			if s, ok := p.Step(c.Step); ok {
				name, known = s.Vendor, true
			}
		}
	}
	if !known {
		return ""
	}
	if name == "" {
		return pipeline.DefaultVendor
	}
	return name
}
