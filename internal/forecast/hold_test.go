package forecast

import (
	"context"
	"strings"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// holdingSet is the test file with weekly-usd holding for its scheduled
// runs.
func holdingSet(t *testing.T) *pipeline.Set {
	t.Helper()
	src := strings.Replace(file, `limit     = { amount = 3000, currency = "USD" }`, `limit     = { amount = 3000, currency = "USD" }
hold_scheduled = true`, 1)
	set, err := pipeline.Parse([]byte(strings.Replace(src, "%s", "", 1)), "test")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := set.Budget("weekly-usd"); !b.HoldScheduled {
		t.Fatal("hold_scheduled did not load")
	}
	return set
}

func holdsAt(t *testing.T, in Input, now time.Time) []ledger.BudgetPeriod {
	t.Helper()
	in.Now = now
	ps, err := Holds(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// A budget with hold_scheduled holds what its Schedules' runs still due
// in the period reserve; a paused Schedule releases it, and so does
// turning hold_scheduled off; a budget without it holds nothing.
func TestHoldsFollowTheSchedules(t *testing.T) {
	l := ledgertest.New(t)
	in := Input{Ledger: l.Led, Pipelines: holdingSet(t)}
	thursday := monday.Add(3*24*time.Hour + 10*time.Hour)
	// Friday, Saturday and Sunday at 09:00, 5.00 USD each.
	ps := holdsAt(t, in, thursday)
	if len(ps) != 1 || ps[0].Budget != "weekly-usd" || ps[0].Period != "2026-W32" || ps[0].HeldForSchedule != 1500 || ps[0].HeldRuns != 3 || ps[0].Free != 1500 {
		t.Fatalf("the holds on Thursday = %+v; want weekly-usd holding 1500 for 3 runs, 1500 free", ps)
	}
	paused := in
	paused.Schedule = func(context.Context, string) (Schedule, error) { return Schedule{Found: true, Paused: true}, nil }
	if ps := holdsAt(t, paused, thursday.Add(time.Minute)); ps[0].HeldForSchedule != 0 || ps[0].Free != 3000 {
		t.Fatalf("with the Schedule paused = %+v; want nothing held", ps)
	}
	if ps := holdsAt(t, in, thursday.Add(2*time.Minute)); ps[0].HeldForSchedule != 1500 {
		t.Fatalf("unpaused = %+v; want 1500 held again", ps)
	}
	other, err := l.Led.BudgetPeriodOf(context.Background(), ledger.BudgetLimit{Budget: "vendor-monthly", Currency: "USD", Limit: 100000}, "2026-08")
	if err != nil || other.HeldForSchedule != 0 || other.HeldRuns != 0 {
		t.Fatalf("a budget without hold_scheduled = %+v, %v; want nothing held", other, err)
	}
	off := in
	off.Pipelines = setOf(t, "")
	off.Now = thursday.Add(3 * time.Minute)
	if ps, err := Holds(context.Background(), off); err != nil || len(ps) != 0 {
		t.Fatalf("with hold_scheduled off = %+v, %v; want no holding budget", ps, err)
	}
	if bp, err := l.Led.BudgetPeriodOf(context.Background(), ledger.BudgetLimit{Budget: "weekly-usd", Currency: "USD", Limit: 3000}, "2026-W32"); err != nil || bp.HeldForSchedule != 0 {
		t.Fatalf("turning hold_scheduled off left %+v, %v; want the hold released", bp, err)
	}
}

// The keeper wakes at a holding budget's next period when it comes before
// HoldEvery, so that a period is held for from its start.
func TestHoldKeeperWakesAtThePeriodsStart(t *testing.T) {
	k := &HoldKeeper{Input: Input{Pipelines: holdingSet(t)}}
	nextMonday := monday.Add(7 * 24 * time.Hour)
	if w := k.wait(nextMonday.Add(-20 * time.Second)); w != 20*time.Second {
		t.Fatalf("20 s before the period ends the keeper waits %v, want 20s", w)
	}
	if w := k.wait(monday.Add(time.Hour)); w != HoldEvery {
		t.Fatalf("mid-period the keeper waits %v, want %v", w, HoldEvery)
	}
	k.Input.Pipelines = setOf(t, "")
	if w := k.wait(nextMonday.Add(-20 * time.Second)); w != HoldEvery {
		t.Fatalf("with no budget holding the keeper waits %v, want %v", w, HoldEvery)
	}
}
