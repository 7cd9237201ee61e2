package ledger

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

func TestSQLiteBudgetShapes(t *testing.T) { testBudgetShapes(t, openURLT(t, newSQLiteURL(t))) }

func TestPostgresBudgetShapes(t *testing.T) {
	postgresDSN(t)
	testBudgetShapes(t, openURLT(t, newPostgresURL(t)))
}

// shapedBudget is budget "weekly" as a pipeline file with the given
// currency, period kind and zone defines it.
func shapedBudget(t *testing.T, currency, period, zone string) pipeline.Budget {
	t.Helper()
	set, err := pipeline.Parse(fmt.Appendf(nil, `
[[budget]]
name      = "weekly"
pipeline  = "weekly"
period    = %q
time_zone = %q
limit     = { amount = 1000, currency = %q }
[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = %q }
`, period, zone, currency, currency), "shapes")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := set.Budget("weekly")
	return b
}

// Issue 24: a budget whose currency, period kind or zone changed in the
// pipeline file while the ledger holds its spend would show that spend as
// free. CheckBudgetShapes refuses it, naming the budget, the periods with
// their money and the fix; a zone that buckets every entry as before, and
// spend under a name the file no longer has, pass. One query
// (BudgetPeriodSpends) reads the spend.
func testBudgetShapes(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	// Monday 09:00 UTC and Sunday 23:30 UTC of 2026-W32; in Tokyo the
	// Sunday is already Monday of 2026-W33.
	sunday := time.Date(2026, 8, 9, 23, 30, 0, 0, time.UTC)
	var eps []Episode
	for i, at := range []time.Time{t0, sunday} {
		res, err := l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: fmt.Sprintf("k%d", i), Period: "2026-W32", NominalTime: at})
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, res.Episode)
	}
	if err := l.CheckBudgetShapes(ctx, []pipeline.Budget{shapedBudget(t, "USD", "iso-week", "UTC")}); err != nil {
		t.Fatalf("an empty ledger: %v", err)
	}
	// 2.50 USD settled, 1.00 USD held in weekly's 2026-W32; 0.50 USD
	// released (not spend); 3.00 USD under a budget the file has dropped.
	mustReserve(t, l, paidRef(eps[0], "video", 0), usd("weekly", "2026-W32", 1000, 250))
	mustSubmitMoney(t, l, paidRef(eps[0], "video", 0), "vt_shape_0", allot.Money{Amount: 250, Currency: "USD"})
	mustReserve(t, l, paidRef(eps[1], "video", 0), usd("weekly", "2026-W32", 1000, 100))
	mustReserve(t, l, paidRef(eps[1], "cover", 0), usd("weekly", "2026-W32", 1000, 50), usd("gone", "2026-08", 1000, 300))
	if _, err := l.ReleaseIntent(ctx, paidRef(eps[1], "cover", 0), testOwner, false); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, l, paidRef(eps[0], "cover", 0), usd("gone", "2026-08", 1000, 300))

	spends, err := l.BudgetPeriodSpends(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []BudgetPeriodSpend{
		{Budget: "gone", Period: "2026-08", Currency: "USD", Reserved: 300, FirstNominal: t0, LastNominal: t0},
		{Budget: "weekly", Period: "2026-W32", Currency: "USD", Settled: 250, Reserved: 100, FirstNominal: t0, LastNominal: sunday},
	}
	if len(spends) != len(want) {
		t.Fatalf("BudgetPeriodSpends = %+v, want %+v", spends, want)
	}
	for i := range want {
		g, w := spends[i], want[i]
		if g.Budget != w.Budget || g.Period != w.Period || g.Currency != w.Currency || g.Settled != w.Settled || g.Reserved != w.Reserved ||
			!g.FirstNominal.Equal(w.FirstNominal) || !g.LastNominal.Equal(w.LastNominal) {
			t.Fatalf("BudgetPeriodSpends[%d] = %+v, want %+v", i, g, w)
		}
	}

	for _, c := range []struct {
		name, currency, period, zone string
		want                         []string // empty: accepted
	}{
		{"unchanged", "USD", "iso-week", "UTC", nil},
		{"a zone that buckets every entry as before", "USD", "iso-week", "America/New_York", nil},
		{"currency", "EUR", "iso-week", "UTC", []string{`budget "weekly"`, "holds its spend in USD, the file says EUR", "2026-W32: 2.50 USD settled, 1.00 USD reserved", `restore currency = "USD"`, `name = "weekly-2"`}},
		{"period kind", "USD", "month", "UTC", []string{`budget "weekly"`, `iso-week periods, the file says period = "month"`, "2026-W32: 2.50 USD settled, 1.00 USD reserved", `restore period = "iso-week"`}},
		{"zone that moves an entry", "USD", "iso-week", "Asia/Tokyo", []string{`budget "weekly"`, `time_zone "Asia/Tokyo" puts elsewhere`, "2026-W32: 2.50 USD settled", "its former time_zone"}},
	} {
		err := l.CheckBudgetShapes(ctx, []pipeline.Budget{shapedBudget(t, c.currency, c.period, c.zone)})
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var re *BudgetReshapedError
		if !errors.Is(err, ErrBudgetReshaped) || !errors.As(err, &re) || len(re.Budgets) != 1 {
			t.Errorf("%s: got %v, want ErrBudgetReshaped", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\ndoes not say %q", c.name, err, w)
			}
		}
	}

	// A ledger whose budget was changed before this check existed holds
	// spend in both currencies: neither shape passes, and restoring one
	// would not help, so the fix is the new name only.
	res, err := l.Allocate(ctx, AllocateInput{Pipeline: "weekly", Key: "k-eur", Period: "2026-W32", NominalTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	mustReserve(t, l, paidRef(res.Episode, "video", 0), Reservation{Budget: "weekly", Period: "2026-W32", Currency: "EUR", Limit: 1000, Amount: 500})
	for _, currency := range []string{"USD", "EUR"} {
		err := l.CheckBudgetShapes(ctx, []pipeline.Budget{shapedBudget(t, currency, "iso-week", "UTC")})
		for _, w := range []string{`budget "weekly"`, "restoring the old one would not help", `name = "weekly-2"`} {
			if !errors.Is(err, ErrBudgetReshaped) || !strings.Contains(err.Error(), w) {
				t.Fatalf("spend in USD and EUR, the file in %s: %v\nwant a refusal saying %q", currency, err, w)
			}
		}
		if strings.Contains(err.Error(), "restore currency") {
			t.Fatalf("spend in USD and EUR, the file in %s: %v\nsays to restore a currency", currency, err)
		}
	}
}
