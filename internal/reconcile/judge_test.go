package reconcile

import (
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// Judge, case by case: every class, the explained lines, and the pending
// one, with the money at stake.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 8, 5, 12, 0, 0, 0, time.UTC)
	task := ledger.PaidTask{PaidTaskRef: ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: "2026-W32-0", Step: "render"},
		IdempotencyKey: "k1", State: allot.PaidSucceeded, RemoteRef: "vt_1"}
	line := ledger.BillLine{Account: "acct", LineID: "ch_1", TaskRef: "vt_1", IdempotencyKey: "k1", Amount: 250, Currency: "USD", ChargedAt: now.Add(-time.Minute), ReadAt: now}
	cost := ledger.CostEntry{RemoteRef: "vt_1", Amount: 250, Currency: "USD"}
	known := Facts{Vendor: "default", Line: line, Task: task, Known: true, Cost: cost, HasCost: true}
	with := func(f Facts, change func(*Facts)) Facts { change(&f); return f }
	bill := pipeline.VendorBill{BillTolerance: 2}

	for name, c := range map[string]struct {
		f       Facts
		class   allot.DriftClass
		pending bool
		money   int64
		detail  string
	}{
		"matches":              {f: known},
		"within the tolerance": {f: with(known, func(f *Facts) { f.Line.Amount = 252 })},
		"beyond the tolerance": {f: with(known, func(f *Facts) { f.Line.Amount = 253 }), class: allot.DriftAmountDiffers, money: 3, detail: "the ledger books 2.50 USD"},
		"below the cost":       {f: with(known, func(f *Facts) { f.Line.Amount = 100 }), class: allot.DriftAmountDiffers, money: 150},
		"another currency":     {f: with(known, func(f *Facts) { f.Line.Currency = "EUR" }), class: allot.DriftAmountDiffers, money: 250, detail: "another currency"},
		"phantom":              {f: with(known, func(f *Facts) { f.Known, f.Task, f.HasCost = false, ledger.PaidTask{}, false }), class: allot.DriftUnrecorded, money: 250, detail: "no paid task of the ledger holds"},
		"double charge":        {f: with(known, func(f *Facts) { f.Earlier = "ch_0" }), class: allot.DriftDoubleCharge, money: 250, detail: "already charged on line ch_0"},
		"refund":               {f: with(known, func(f *Facts) { f.Line.Refund, f.Line.Amount = true, 100 }), class: allot.DriftRefunded, money: 100, detail: "refunded 1.00 USD"},
		"refund of a phantom":  {f: with(known, func(f *Facts) { f.Line.Refund, f.Known = true, false }), class: allot.DriftRefunded, money: 250},
		"refund beats double":  {f: with(known, func(f *Facts) { f.Line.Refund, f.Earlier = true, "ch_0" }), class: allot.DriftRefunded, money: 250},
		"absurd amount":        {f: with(known, func(f *Facts) { f.Line.Amount = -1 << 63 }), class: allot.DriftAmountDiffers, money: -1 << 63, detail: "outside 0.."},
		"no cost, no money":    {f: with(known, func(f *Facts) { f.HasCost, f.Line.Amount = false, 0 })},
		"no cost booked":       {f: with(known, func(f *Facts) { f.HasCost = false }), class: allot.DriftUnrecorded, money: 250, detail: "books no cost"},
		"answer on its way": {f: with(known, func(f *Facts) {
			f.ByKeyOnly, f.HasCost, f.Task.State, f.Task.RemoteRef = true, false, allot.PaidIntent, ""
		}), pending: true},
		"answer lost": {f: with(known, func(f *Facts) {
			f.ByKeyOnly, f.HasCost, f.Task.State, f.Task.RemoteRef = true, false, allot.PaidIntent, ""
			f.Line.ChargedAt = now.Add(-2 * time.Hour)
		}), class: allot.DriftUnrecorded, money: 250, detail: "starter episode lookup --pipeline weekly-video --episode 2026-W32-0 --step render"},
		"item of a running batch": {f: with(known, func(f *Facts) {
			f.ByKeyOnly, f.HasCost, f.Task.State, f.Task.RemoteRef, f.InBatch = true, false, allot.PaidIntent, "", true
			f.Line.ChargedAt = now.Add(-20 * time.Hour)
		}), pending: true},
		"key of a task with another reference": {f: with(known, func(f *Facts) { f.ByKeyOnly, f.Line.TaskRef = true, "vt_9" }), class: allot.DriftUnrecorded, money: 250, detail: `under another reference ("vt_1")`},
	} {
		v := Judge(c.f, bill, now)
		if v.Class != c.class || v.Pending != c.pending || v.Money.Amount != c.money {
			t.Errorf("%s: got class %q pending %v money %d, want %q %v %d (%s)", name, v.Class, v.Pending, v.Money.Amount, c.class, c.pending, c.money, v.Detail)
		}
		if c.class != "" && (v.Money.Currency == "" || !strings.Contains(v.Detail, c.detail)) {
			t.Errorf("%s: detail %q, want it to say %q, money %s", name, v.Detail, c.detail, v.Money)
		}
		if c.class == "" && v.Detail != "" {
			t.Errorf("%s: an explained line has detail %q", name, v.Detail)
		}
	}
}

func TestJudgeUnbilledNamesTheGrace(t *testing.T) {
	c := ledger.UnbilledCost{AuditCost: ledger.AuditCost{CostEntry: ledger.CostEntry{RemoteRef: "vt_2", Pipeline: "p", EpisodeID: "2026-W32-0", Step: "s", Amount: 300, Currency: "USD"}}}
	v := JudgeUnbilled("default", c, pipeline.VendorBill{BillGrace: "30m"})
	if v.Class != allot.DriftUncharged || v.Money != (allot.Money{Amount: 300, Currency: "USD"}) || !strings.Contains(v.Detail, "30m0s") {
		t.Fatalf("%+v", v)
	}
}
