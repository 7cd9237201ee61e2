package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/ledgertest"
)

// Spend the budget's entries leave out is shown, not lost (issue 41 §1):
// two tasks charged without a reservation are outside video-weekly's
// records, split into acknowledged and open once a person acknowledges
// one; check then flags only the open one in that budget (the other
// budget covering them still flags both, its acknowledgement being its
// own).
func TestOutsideRecordsShowsWhatTheEntriesLeaveOut(t *testing.T) {
	l, _ := budgetLedger(t) // video-weekly 2026-W32: 200 settled, 500 held
	set := ledgertest.BudgetPipelines(t)
	fixture := &ledgertest.Ledger{T: t, Led: l.led}
	ctx := context.Background()
	early := fixture.ChargeWithoutReservation("weekly", mon.Add(10*time.Hour), "vt_early", 300)
	fixture.ChargeWithoutReservation("weekly", mon.Add(11*time.Hour), "vt_late", 300)
	b, _ := set.Budget("video-weekly")
	got, err := OutsideRecords(ctx, l.led, set, b, "2026-W32")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Charges) != 2 || got.Amount != 600 || got.Open != 600 || got.OpenCount != 2 || got.Acknowledged != 0 || got.Imported != 0 {
		t.Fatalf("outside video-weekly 2026-W32: %+v", got)
	}
	if other, err := OutsideRecords(ctx, l.led, set, b, "2026-W33"); err != nil || len(other.Charges) != 0 {
		t.Fatalf("another period: %+v, %v", other, err)
	}
	exceeded := func() int {
		t.Helper()
		res, err := Audit(ctx, l.led, CheckInput{Pipelines: set})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range res.Violations {
			if v.Kind == ledger.KindBudgetExceeded && strings.Contains(v.Detail, "budget video-weekly period 2026-W32") {
				n++
			}
		}
		return n
	}
	if exceeded() != 1 {
		t.Fatal("charged 8.00 USD against a limit of 7.50 USD, check finds no budget_exceeded")
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: early.ID, Step: "video"}
	if _, err := l.led.AcknowledgeCharges(ctx, []ledger.ChargeAck{{Budget: "video-weekly", Period: "2026-W32", PaidTaskRef: ref, Amount: 300, Currency: "USD", By: "carol", Reason: "sent before the budget existed"}}, mon); err != nil {
		t.Fatal(err)
	}
	view, err := BudgetPeriod(ctx, l.led, set, b, "2026-W32")
	if err != nil {
		t.Fatal(err)
	}
	if o := view.Outside; o == nil || o.Amount != 600 || o.Acknowledged != 300 || o.Open != 300 || o.OpenCount != 1 {
		t.Fatalf("after one acknowledgement, the period's view: %+v", o)
	}
	// The acknowledged 3.00 USD no longer counts against the limit: 5.00
	// USD charged of 7.50.
	if exceeded() != 0 {
		t.Fatal("an acknowledged charge still counts against the limit")
	}
	res, err := Audit(ctx, l.led, CheckInput{Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	flagged := map[string]int{}
	for _, v := range res.Violations {
		if v.Kind == KindChargeUnreserved {
			for _, name := range []string{"video-weekly", "default-monthly"} {
				if containsBudget(v.Detail, name) {
					flagged[name]++
				}
			}
		}
	}
	if flagged["video-weekly"] != 1 || flagged["default-monthly"] != 2 {
		t.Fatalf("charge_unreserved per budget after acknowledging one in video-weekly: %v, want video-weekly 1, default-monthly 2\n%v", flagged, res.Violations)
	}
}

func containsBudget(detail, name string) bool { return strings.Contains(detail, "budget "+name+" ") }
