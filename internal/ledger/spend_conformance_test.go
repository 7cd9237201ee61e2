package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// testSpendPerDay: the costs of the window are summed per UTC day of their
// recorded_at, pipeline, step, vendor (from the pinned plan) and currency;
// a cost recorded before the window is not read.
func testSpendPerDay(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ep := alloc(t, l, "weekly", "k1", "2026-W32", 0).Episode
	if _, err := l.PinPlan(ctx, "weekly", ep.ID, billPlan); err != nil {
		t.Fatal(err)
	}
	ep2 := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	if _, err := l.PinPlan(ctx, "weekly", ep2.ID, billPlan); err != nil {
		t.Fatal(err)
	}
	ep3 := alloc(t, l, "weekly", "k3", "2026-W31", 0).Episode
	day := func(d int, hour int) time.Time { return time.Date(2026, 8, d, hour, 30, 0, 0, time.UTC) }
	for _, c := range []struct {
		ep     Episode
		step   string
		ref    string
		amount int64
		cur    string
		at     time.Time
	}{
		{ep, "video", "v1", 100, "EUR", day(3, 0)},
		{ep2, "video", "v2", 250, "EUR", day(3, 23)}, // same day, vendor and step: summed
		{ep, "cover", "c1", 40, "EUR", day(3, 12)},   // the default vendor: ""
		{ep2, "cover", "c2", 7, "USD", day(4, 1)},
		{ep3, "video", "old", 999, "EUR", day(1, 23)}, // before the window
	} {
		r := paidRef(c.ep, c.step, 0)
		mustIntent(t, l, r)
		mustSubmitMoney(t, l, r, c.ref, allot.Money{Amount: c.amount, Currency: c.cur})
		rawExec(t, l, `UPDATE cost_entries SET recorded_at = ? WHERE remote_ref = ?`, l.d.timeArg(c.at), c.ref)
	}
	got, err := l.SpendPerDay(ctx, day(2, 0).Add(-30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := []DaySpend{
		{Day: "2026-08-03", Pipeline: "weekly", Step: "cover", Vendor: "", Currency: "EUR", Amount: 40},
		{Day: "2026-08-03", Pipeline: "weekly", Step: "video", Vendor: "acme", Currency: "EUR", Amount: 350},
		{Day: "2026-08-04", Pipeline: "weekly", Step: "cover", Vendor: "", Currency: "USD", Amount: 7},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SpendPerDay = %+v\nwant %+v", got, want)
	}
	if got, err := l.SpendPerDay(ctx, day(5, 0)); err != nil || len(got) != 0 {
		t.Fatalf("SpendPerDay of a window without costs = %+v, %v", got, err)
	}
	if _, err := l.SpendPerDay(ctx, time.Time{}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("SpendPerDay without a start: %v, want ErrInvalidInput", err)
	}
	// Amounts no API writes (each is at most allot.MaxAmount), whose sum
	// leaves int64: an error, never a wrapped total.
	for _, ref := range []string{"huge-1", "huge-2"} {
		rawInsertCost(t, l, ref, paidRef(ep3, "cover", 0), 5_000_000_000_000_000_000)
	}
	if got, err := l.SpendPerDay(ctx, t0.Add(-time.Hour)); err == nil {
		t.Fatalf("SpendPerDay over an overflowing sum = %+v, want an error", got)
	}
}

// testSpendPerDayUsesIndex: the chart reads one range of
// cost_entries_recorded and each cost's episode by its key, never a scan.
func testSpendPerDayUsesIndex(t *testing.T, l *Ledger) {
	plan := queryPlan(t, l, l.d.q(l.spendPerDayQuery()), l.d.timeArg(t0))
	if l.d == sqliteDialect && !strings.Contains(plan, "cost_entries_recorded") {
		t.Errorf("SpendPerDay does not use cost_entries_recorded:\nplan:\n%s", plan)
	}
	for _, line := range strings.Split(plan, "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "Seq Scan") || strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") {
			t.Errorf("SpendPerDay scans a table: %q\nplan:\n%s", line, plan)
		}
	}
}
