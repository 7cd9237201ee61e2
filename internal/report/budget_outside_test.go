package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
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

// An effect step pinned before max_cost existed is covered by the budget
// as the file prices it now, on the page as in check: its charge outside
// the records is shown.
func TestOutsideRecordsJudgesAnOldPinnedPlanAsCheckDoes(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[budget]]
name     = "news-weekly"
pipeline = "news"
period   = "iso-week"
limit    = { amount = 1000, currency = "USD" }

[[pipeline]]
name = "news"
  [[pipeline.step]]
  name     = "publish"
  kind     = "effect"
  max_cost = { amount = 100, currency = "USD" }
`), "outside")
	if err != nil {
		t.Fatal(err)
	}
	l := ledgertest.New(t)
	ctx := context.Background()
	ep := l.Allocate("news", mon)
	if _, err := l.Led.PinPlan(ctx, "news", ep.ID, `[{"name":"publish","kind":"effect"}]`); err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "news", EpisodeID: ep.ID, Step: "publish"}
	if _, err := l.Led.WriteIntent(ctx, ref, allot.IdempotencyKey("news", ep.ID, "publish", 0), "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: "vt_old_plan", Amount: 50, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	b, _ := set.Budget("news-weekly")
	got, err := OutsideRecords(ctx, l.Led, set, b, "2026-W32")
	if err != nil || len(got.Charges) != 1 || got.Open != 50 {
		t.Fatalf("outside news-weekly: %+v, %v; want the old plan's publish charge", got, err)
	}
}
