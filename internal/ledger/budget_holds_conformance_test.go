package ledger

import (
	"errors"
	"testing"
	"time"

	"allot"
)

// Conformance tests of the hold for scheduled runs (budget_holds.go;
// docs/design.md, "Scheduled work funded first"), registered in
// runConformance so that both drivers run them.

// W32 is Monday 2026-08-03 to Sunday 2026-08-09 (UTC); the Schedule of
// "weekly" runs every day at 09:00.
func w32Day(day int, hour int) time.Time {
	return time.Date(2026, 8, 3+day, hour, 0, 0, 0, time.UTC)
}

// scheduledRuns are weekly's runs of days from..to (0 is Monday) at 09:00,
// each reserving amount.
func scheduledRuns(from, to int, amount int64) []ScheduledRun {
	var out []ScheduledRun
	for d := from; d <= to; d++ {
		out = append(out, ScheduledRun{Pipeline: "weekly", At: w32Day(d, 9), Amount: amount})
	}
	return out
}

// runAt allocates weekly's episode under the key its Schedule (or a
// backfill of it) gives the nominal time at.
func runAt(t *testing.T, l *Ledger, at time.Time) Episode {
	t.Helper()
	res, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", at), Period: "2026-W32", NominalTime: at})
	if err != nil {
		t.Fatal(err)
	}
	return res.Episode
}

func hold(t *testing.T, l *Ledger, at time.Time, runs []ScheduledRun) BudgetPeriod {
	t.Helper()
	bp, err := l.HoldScheduled(ctxT(t), HoldInput{Budget: BudgetLimit{Budget: "evals", Currency: "USD", Limit: 1000}, Period: "2026-W32", Runs: runs, At: at})
	if err != nil {
		t.Fatalf("HoldScheduled at %v: %v", at, err)
	}
	return bp
}

func wantHeld(t *testing.T, bp BudgetPeriod, held int64, runs int, free int64) {
	t.Helper()
	if bp.HeldForSchedule != held || bp.HeldRuns != runs || bp.Free != free {
		t.Fatalf("budget %s period %s: held %d for %d runs, free %d; want held %d for %d runs, free %d (%+v)",
			bp.Budget, bp.Period, bp.HeldForSchedule, bp.HeldRuns, bp.Free, held, runs, free, bp)
	}
}

// A backfill in the middle of a period cannot starve the period's
// scheduled runs: the budget holds what the runs still due will reserve;
// the backfill spends only the rest; each scheduled run draws on its own
// hold (what it asks beyond comes from what is free); a retry of a
// scheduled episode spends only what is not held; a paused Schedule
// releases the hold, and a hold never exceeds the limit.
func testBudgetHoldsScheduled(t *testing.T, l *Ledger) {
	evals := func(amount int64) Reservation { return usd("evals", "2026-W32", 1000, amount) }
	view := func() BudgetPeriod { return mustPeriod(t, l, "evals", "2026-W32", 1000) }

	// Wednesday noon: Thursday to Sunday are still due, 2.00 USD each.
	wantHeld(t, hold(t, l, w32Day(2, 12), scheduledRuns(3, 6, 200)), 800, 4, 200)

	// A backfill of Monday to Wednesday's 10:00 (not held: their time
	// passed before the hold was written) gets the 2.00 USD not held.
	var backfill []Episode
	for d := range 3 {
		backfill = append(backfill, runAt(t, l, w32Day(d, 10)))
	}
	mustReserve(t, l, paidRef(backfill[0], "eval", 0), evals(100))
	mustReserve(t, l, paidRef(backfill[1], "eval", 0), evals(100))
	pt, err := reserve(t, l, paidRef(backfill[2], "eval", 0), evals(100))
	be := wantRefused(t, pt, err, "evals")
	if s := be.Shortfalls[0]; s.HeldForSchedule != 800 || s.Needed() != 1100 {
		t.Fatalf("the backfill's refusal counts %d held for the schedule and needs a limit of %d, want 800 and 1100: %+v", s.HeldForSchedule, s.Needed(), s)
	}
	wantHeld(t, view(), 800, 4, 0)

	// Thursday's run starts at 09:00 and reaches its paid step past
	// HoldGrace, after the worker wrote the holds again: its hold is kept
	// until it draws.
	thu := runAt(t, l, w32Day(3, 9))
	wantHeld(t, hold(t, l, w32Day(3, 9).Add(HoldGrace+20*time.Minute), scheduledRuns(4, 6, 200)), 800, 4, 0)
	mustReserve(t, l, paidRef(thu, "eval", 0), evals(200))
	wantHeld(t, view(), 600, 3, 0)

	// A retry, or a second paid step, of Thursday's episode is not a
	// scheduled run: it may not spend Friday to Sunday's hold.
	pt, err = reserve(t, l, paidRef(thu, "cover", 0), evals(100))
	if s := wantRefused(t, pt, err, "evals").Shortfalls[0]; s.HeldForSchedule != 600 {
		t.Fatalf("the retry's refusal counts %d held for the schedule, want 600", s.HeldForSchedule)
	}

	// The Schedule is paused: its hold is released at once, and the
	// backfill's third run is admitted.
	wantHeld(t, hold(t, l, w32Day(3, 11), nil), 0, 0, 600)
	mustReserve(t, l, paidRef(backfill[2], "eval", 0), evals(100))

	// Unpaused: 5.00 USD are left, so Friday and Saturday are held and
	// Sunday is not (a hold never exceeds the limit); 1.00 USD is free.
	wantHeld(t, hold(t, l, w32Day(3, 12), scheduledRuns(4, 6, 200)), 400, 2, 100)
	// Friday's run is priced above its hold: what it asks beyond comes
	// from what is free, never from Saturday's hold. 3.50 USD is 0.50 USD
	// more than its hold and what is free give; 2.50 USD fits.
	fri := runAt(t, l, w32Day(4, 9))
	pt, err = reserve(t, l, paidRef(fri, "eval", 0), evals(350))
	if s := wantRefused(t, pt, err, "evals").Shortfalls[0]; s.HeldForSchedule != 200 {
		t.Fatalf("Friday's refusal counts %d held for the schedule, want Saturday's 200", s.HeldForSchedule)
	}
	mustReserve(t, l, paidRef(fri, "eval", 0), evals(250))
	wantHeld(t, view(), 200, 1, 50)
	mustReserve(t, l, paidRef(runAt(t, l, w32Day(5, 9)), "eval", 0), evals(200))
	wantHeld(t, view(), 0, 0, 50)
	pt, err = reserve(t, l, paidRef(runAt(t, l, w32Day(6, 9)), "eval", 0), evals(200))
	wantRefused(t, pt, err, "evals")
	wantSpend(t, l, "evals", "2026-W32", 1000, 0, 950)
}

// A scheduled run that did not come is held for HoldGrace after its time,
// then released; a hold written for a new period releases the last one's,
// but for a run that started and has not drawn yet.
func testBudgetHoldsLapse(t *testing.T, l *Ledger) {
	wantHeld(t, hold(t, l, w32Day(0, 8), scheduledRuns(0, 1, 300)), 600, 2, 400)
	// Monday's 09:00 has not started by 09:30: still held.
	wantHeld(t, hold(t, l, w32Day(0, 9).Add(30*time.Minute), scheduledRuns(1, 1, 300)), 600, 2, 400)
	// By 10:01 it is HoldGrace late: released.
	wantHeld(t, hold(t, l, w32Day(0, 9).Add(HoldGrace+time.Minute), scheduledRuns(1, 1, 300)), 300, 1, 700)
	// Sunday 23:30's run starts; its paid step comes after midnight. The
	// next week's hold releases this week's, but for that run, which keeps
	// its hold until it draws on it.
	sunday := w32Day(6, 23).Add(30 * time.Minute)
	wantHeld(t, hold(t, l, w32Day(6, 23), []ScheduledRun{{Pipeline: "weekly", At: sunday, Amount: 300}}), 300, 1, 700)
	late := runAt(t, l, sunday)
	next := func(at time.Time) BudgetPeriod {
		t.Helper()
		bp, err := l.HoldScheduled(ctxT(t), HoldInput{Budget: BudgetLimit{Budget: "evals", Currency: "USD", Limit: 1000}, Period: "2026-W33",
			Runs: []ScheduledRun{{Pipeline: "weekly", At: w32Day(7, 9), Amount: 300}}, At: at})
		if err != nil {
			t.Fatal(err)
		}
		return bp
	}
	wantHeld(t, next(w32Day(7, 0)), 300, 1, 700)
	wantHeld(t, next(w32Day(7, 2)), 300, 1, 700)
	wantHeld(t, mustPeriod(t, l, "evals", "2026-W32", 1000), 300, 1, 700)
	mustReserve(t, l, paidRef(late, "eval", 0), usd("evals", "2026-W32", 1000, 300))
	wantHeld(t, mustPeriod(t, l, "evals", "2026-W32", 1000), 0, 0, 700)
	// Malformed holds are refused, and nothing is written.
	for _, in := range []HoldInput{
		{Budget: BudgetLimit{Currency: "USD", Limit: 1000}, Period: "2026-W33"},
		{Budget: BudgetLimit{Budget: "evals", Currency: "usd", Limit: 1000}, Period: "2026-W33"},
		{Budget: BudgetLimit{Budget: "evals", Currency: "USD", Limit: 1000}, Period: "2026-W33", Runs: []ScheduledRun{{Pipeline: "weekly", At: w32Day(8, 9), Amount: -1}}},
		{Budget: BudgetLimit{Budget: "evals", Currency: "USD", Limit: 1000}, Period: "2026-W33", Runs: []ScheduledRun{{At: w32Day(8, 9), Amount: 1}}},
	} {
		if _, err := l.HoldScheduled(ctxT(t), in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("HoldScheduled(%+v) = %v, want ErrInvalidInput", in, err)
		}
	}
	wantHeld(t, mustPeriod(t, l, "evals", "2026-W33", 1000), 300, 1, 700)
}
