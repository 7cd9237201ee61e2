package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

func TestBudgetListShowsPeriodsAndParkedEpisodes(t *testing.T) {
	l, eps := budgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	res, err := Budgets(context.Background(), l.led, BudgetsInput{Pipelines: set, Now: nextMon})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Budgets) != 2 || res.Budgets[0].Name != "video-weekly" || res.Budgets[1].Name != "default-monthly" {
		t.Fatalf("budgets %+v", res.Budgets)
	}
	weekly := res.Budgets[0].Periods
	// 2026-W32 with its spending, and the current week (W33), empty.
	if len(weekly) != 2 || weekly[0].Period != "2026-W32" || weekly[1].Period != "2026-W33" {
		t.Fatalf("weekly periods %+v", weekly)
	}
	w32 := weekly[0]
	if w32.Limit != 750 || w32.Settled != 200 || w32.Reserved != 500 || w32.Free != 50 || !slices.Equal(w32.Parked, []string{"weekly/" + eps[3].ID}) {
		t.Fatalf("2026-W32: %+v", w32)
	}
	if w33 := weekly[1]; w33.Free != 750 || len(w33.Parked) != 0 {
		t.Fatalf("2026-W33: %+v", w33)
	}
	monthly := res.Budgets[1].Periods
	if len(monthly) != 1 || monthly[0].Period != "2026-08" || !slices.Equal(monthly[0].Parked, []string{"weekly/" + eps[3].ID}) {
		t.Fatalf("monthly periods %+v", monthly)
	}
	if _, err := Budgets(context.Background(), l.led, BudgetsInput{Pipelines: set, Budget: "nope"}); !isType(err, allot.InvalidInput) || !strings.Contains(err.Error(), "video-weekly, default-monthly") {
		t.Fatalf("an unknown budget: %v", err)
	}

	show, err := BudgetShow(context.Background(), l.led, BudgetShowInput{Pipelines: set, Budget: "video-weekly", Period: "2026-W32"})
	if err != nil {
		t.Fatal(err)
	}
	if len(show.Tasks) != 3 || show.Tasks[0].State != ledger.EntrySettled || show.Tasks[0].Settled != 200 || show.Tasks[1].State != ledger.EntryHeld {
		t.Fatalf("tasks %+v", show.Tasks)
	}
	if _, err := BudgetShow(context.Background(), l.led, BudgetShowInput{Pipelines: set, Budget: "video-weekly", Period: "2026-08"}); !isType(err, allot.InvalidInput) {
		t.Fatalf("a month for a weekly budget: %v", err)
	}
}

func TestStatsCostsAndCheckShowBudgets(t *testing.T) {
	l, eps := budgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	ctx := context.Background()
	st, err := Stats(ctx, l.led, StatsInput{Pipeline: "weekly", Pipelines: set})
	if err != nil || len(st.Budgets) != 2 || st.Budgets[0].Budget != "video-weekly" || st.Budgets[0].Settled != 200 || st.Budgets[1].Period != "2026-08" {
		t.Fatalf("stats budgets %+v, %v", st.Budgets, err)
	}
	cs, err := Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: "2026-W33", Pipelines: set})
	if err != nil || len(cs.Budgets) != 0 {
		t.Fatalf("costs of a week without episodes: %+v, %v", cs.Budgets, err)
	}
	cs, err = Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: "2026-W32", Pipelines: set})
	if err != nil || len(cs.Budgets) != 2 || cs.Budgets[0].Reserved != 500 {
		t.Fatalf("costs budgets %+v, %v", cs.Budgets, err)
	}

	res, err := Audit(ctx, l.led, CheckInput{Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		if v.Kind == ledger.KindReservationMissing || v.Kind == ledger.KindBudgetExceeded {
			t.Fatalf("a ledger written by the protocol: %v", v)
		}
	}
	// An intent written without its reservation (before the budget
	// existed), and a period over its limit once the limit is lowered.
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: eps[3].ID, Step: "cover"}
	if _, err := l.led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly", eps[3].ID, "cover", 0), "old-worker"); err != nil {
		t.Fatal(err)
	}
	// (The step's max_cost goes down with it: a max_cost above a limit
	// is refused when the file is read.)
	lowered := strings.Replace(strings.Replace(ledgertest.BudgetSet, "amount = 750", "amount = 100", 1), "max_cost = { amount = 250", "max_cost = { amount = 100", 1)
	low, err := pipeline.Parse([]byte(lowered), "lowered")
	if err != nil {
		t.Fatal(err)
	}
	res, err = Audit(ctx, l.led, CheckInput{Pipelines: low})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range res.Violations {
		got[v.Kind]++
	}
	if got[ledger.KindReservationMissing] != 1 || got[ledger.KindBudgetExceeded] != 1 || res.OK {
		t.Fatalf("violations %v", res.Violations)
	}
}

// Spend that reached the vendor without a reservation is found from the
// charges themselves: each such task, and the period its charges take over
// the limit while the budget's entries show room (issue 24: 750 charged
// under a budget of 500 that showed 500 settled, and check said nothing).
func TestCheckFindsChargesWithoutAReservation(t *testing.T) {
	l, eps := budgetLedger(t) // video-weekly 2026-W32: 200 settled, 500 held, limit 750
	set := ledgertest.BudgetPipelines(t)
	ctx := context.Background()
	// Two more episodes' video tasks reached the vendor with nothing
	// reserved (as the stale read of issue 24 did), 300 each.
	for i := range 2 {
		ep := l.Allocate("weekly", mon.Add(time.Duration(10+i)*time.Hour))
		ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
		if _, err := l.led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly", ep.ID, "video", 0), "stale-attempt"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: "vt_unreserved_" + ep.ID, Amount: 300, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	// The held reservations settle at 250 each: entries count 700 settled
	// (under the 750 limit); the vendor charged 1,300.
	for i, ep := range eps[1:3] {
		ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
		if _, err := l.led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: fmt.Sprintf("vt_%d", i+1), Amount: 250, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Audit(ctx, l.led, CheckInput{Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	var unreserved, exceeded []ledger.Violation
	for _, v := range res.Violations {
		switch v.Kind {
		case KindChargeUnreserved:
			unreserved = append(unreserved, v)
		case ledger.KindBudgetExceeded:
			exceeded = append(exceeded, v)
		}
	}
	// Each unreserved task in both budgets that cover it.
	if len(unreserved) != 4 || res.OK {
		t.Fatalf("charge_unreserved %d, want 4 (2 tasks x 2 budgets): %v", len(unreserved), res.Violations)
	}
	if !strings.Contains(unreserved[0].Detail, "without a reservation in budget") || !strings.Contains(unreserved[0].Fix, allot.BudgetShowCommand("video-weekly", "2026-W32")) &&
		!strings.Contains(unreserved[0].Fix, allot.BudgetShowCommand("default-monthly", "2026-08")) {
		t.Fatalf("charge_unreserved says %q, fix %q", unreserved[0].Detail, unreserved[0].Fix)
	}
	if len(exceeded) != 1 || !strings.Contains(exceeded[0].Detail, "budget video-weekly period 2026-W32") || !strings.Contains(exceeded[0].Detail, "charged 13.00 USD") {
		t.Fatalf("budget_exceeded %v, want video-weekly 2026-W32 charged 13.00 USD", exceeded)
	}
}

// The vendor's bill is read too: a period whose bill exceeds its limit is
// reported though the ledger's costs (and its budget entries) fit.
func TestCheckFindsABudgetExceededOnTheVendorsBill(t *testing.T) {
	l, eps := budgetLedger(t) // video-weekly 2026-W32: 200 settled, 500 held, limit 750
	set := ledgertest.BudgetPipelines(t)
	ctx := context.Background()
	for i, ep := range eps[1:3] {
		ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
		if _, err := l.led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: fmt.Sprintf("vt_%d", i+1), Amount: 250, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	bill := fakeBill{
		{TaskID: "vt_0", Amount: 200, Currency: "USD"},
		{TaskID: "vt_1", Amount: 250, Currency: "USD"},
		{TaskID: "vt_2", Amount: 400, Currency: "USD"}, // the ledger booked 250
	}
	exceeded := func(in CheckInput) []ledger.Violation {
		res, err := Audit(ctx, l.led, in)
		if err != nil {
			t.Fatal(err)
		}
		var out []ledger.Violation
		for _, v := range res.Violations {
			if v.Kind == ledger.KindBudgetExceeded {
				out = append(out, v)
			}
		}
		return out
	}
	if got := exceeded(CheckInput{Pipelines: set}); len(got) != 0 {
		t.Fatalf("by the ledger alone (700 of 750): %v", got)
	}
	got := exceeded(CheckInput{Pipelines: set, Vendors: []VendorCharges{{Name: pipeline.DefaultVendor, Charges: &bill}}})
	if len(got) != 1 || !strings.Contains(got[0].Detail, "budget video-weekly period 2026-W32") || !strings.Contains(got[0].Detail, "charged 8.50 USD") {
		t.Fatalf("with the vendor's bill (850 of 750): %v", got)
	}
}

func isType(err error, errType string) bool {
	return allot.ErrorType(err) == errType
}
