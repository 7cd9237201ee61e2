package console

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// spendSet is the budget fixture's pipelines and a pipeline, solo, whose
// paid step at the covers vendor no budget covers.
const spendSet = ledgertest.BudgetSet + `
[[pipeline]]
name = "solo"
  [[pipeline.step]]
  name   = "img"
  kind   = "paid"
  vendor = "covers"
`

// spendCost is one cost the spend fixture records and the vendor the page
// must book it to.
type spendCost struct {
	pipeline, step, ref, vendor string
	money                       allot.Money
	plan                        string // pinned before the cost, if any
}

var spendCosts = []spendCost{
	{"weekly", "video", "w-video", "default", allot.Money{Amount: 200, Currency: "USD"}, ""},
	{"weekly", "cover", "w-cover", "covers", allot.Money{Amount: 30, Currency: "USD"}, ""},
	{"solo", "img", "s-img", "covers", allot.Money{Amount: 45, Currency: "USD"}, ""},
	// The pinned plan's vendor wins over the pipeline file's.
	{"solo", "img", "s-xss", xss, allot.Money{Amount: 15, Currency: "EUR"}, `[{"name":"img","kind":"paid","vendor":"` + strings.ReplaceAll(xss, "/", `\/`) + `"}]`},
}

// spendFixture records spendCosts through the ledger's API (an episode
// each) and reads the board at the last cost's time.
func spendFixture(t *testing.T) (ReadInput, Board, []ledger.CostEntry) {
	t.Helper()
	l := ledgertest.New(t)
	ctx := context.Background()
	for i, c := range spendCosts {
		ep := l.Allocate(c.pipeline, ledgertest.BudgetMonday.Add(time.Duration(i)*time.Hour))
		if c.plan != "" {
			if _, err := l.Led.PinPlan(ctx, c.pipeline, ep.ID, c.plan); err != nil {
				t.Fatal(err)
			}
		}
		ref := ledger.PaidTaskRef{Pipeline: c.pipeline, EpisodeID: ep.ID, Step: c.step}
		if _, err := l.Led.WriteIntent(ctx, ref, allot.IdempotencyKey(c.pipeline, ep.ID, c.step, 0), "op-test"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: c.ref, Amount: c.money.Amount, Currency: c.money.Currency}); err != nil {
			t.Fatal(err)
		}
	}
	costs, err := l.Led.Costs(ctx, "", "")
	if err != nil || len(costs) != len(spendCosts) {
		t.Fatalf("Costs = %+v, %v; want %d", costs, err, len(spendCosts))
	}
	set, err := pipeline.Parse([]byte(spendSet), "spend_test")
	if err != nil {
		t.Fatal(err)
	}
	// The ledger stamps costs with the wall clock: the board is read at
	// the latest, so that every cost falls in its window.
	in := ReadInput{Ledger: l.Led, Pipelines: set}
	for _, c := range costs {
		if c.RecordedAt.After(in.Now) {
			in.Now = c.RecordedAt
		}
	}
	b, err := Read(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	return in, b, costs
}

// vendorOfRef is the vendor the page must book each cost to.
func vendorOfRef(ref string) string {
	for _, c := range spendCosts {
		if c.ref == ref {
			return c.vendor
		}
	}
	return ""
}

// The chart's series hold, per UTC day and vendor, the sum of the costs the
// ledger recorded; a day without costs is 0.
func TestSpendChartSumsTheRecordedCosts(t *testing.T) {
	in, b, costs := spendFixture(t)
	if len(b.SpendDays) != SpendDays || b.SpendDays[SpendDays-1] != in.Now.UTC().Format(ledger.DayLayout) {
		t.Fatalf("chart days = %v, want %d ending %s", b.SpendDays, SpendDays, in.Now.UTC().Format(ledger.DayLayout))
	}
	type key struct{ day, vendor, currency string }
	want := map[key]int64{}
	for _, c := range costs {
		want[key{c.RecordedAt.UTC().Format(ledger.DayLayout), vendorOfRef(c.RemoteRef), c.Currency}] += c.Amount
	}
	got := map[key]int64{}
	for _, s := range b.Spend {
		if len(s.Amounts) != SpendDays {
			t.Fatalf("series %s %s has %d points, want %d", s.Vendor, s.Currency, len(s.Amounts), SpendDays)
		}
		var total int64
		for i, a := range s.Amounts {
			if a != 0 {
				got[key{b.SpendDays[i], s.Vendor, s.Currency}] = a
			}
			total += a
		}
		if total != s.Total {
			t.Errorf("series %s %s: total %d, points sum to %d", s.Vendor, s.Currency, s.Total, total)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("chart points %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: chart %d, ledger %d", k, got[k], v)
		}
	}
	// The first day holds no cost (they were all recorded just now): 0
	// in every series and in the day totals.
	for _, s := range b.Spend {
		if s.Amounts[0] != 0 {
			t.Errorf("series %s %s on %s = %d, want 0", s.Vendor, s.Currency, b.SpendDays[0], s.Amounts[0])
		}
	}
	var currencies []string
	for _, c := range b.SpendCharts {
		currencies = append(currencies, c.Currency)
		if c.Totals[0] != 0 {
			t.Errorf("%s chart on %s = %d, want 0", c.Currency, b.SpendDays[0], c.Totals[0])
		}
	}
	if !slices.Equal(currencies, []string{"EUR", "USD"}) {
		t.Errorf("charts %v, want one per currency: EUR, USD", currencies)
	}
	// The page prints each series' total as money.
	srv := httptest.NewServer(NewServer(in, nil))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	for _, m := range []string{"2.00 USD", "0.75 USD", "0.15 EUR"} {
		if !strings.Contains(page, m) {
			t.Errorf("the page does not print %s", m)
		}
	}
	if !strings.Contains(page, `<svg class="chart"`) {
		t.Errorf("the page draws no spend chart")
	}
}

// A pipeline whose paid steps no budget covers shows what this calendar
// month settled, per vendor; a budgeted pipeline is not listed.
func TestUnbudgetedSpendPerPipelineAndVendor(t *testing.T) {
	in, b, costs := spendFixture(t)
	month := in.Now.UTC().Format("2006-01")
	if b.UnbudgetedMonth != month {
		t.Fatalf("unbudgeted month %q, want %q", b.UnbudgetedMonth, month)
	}
	want := map[string]map[string]int64{} // vendor -> currency -> amount, of solo this month
	want["covers"] = map[string]int64{}   // listed even before it spends
	for _, c := range costs {
		if c.Pipeline != "solo" || c.RecordedAt.UTC().Format("2006-01") != month {
			continue
		}
		v := vendorOfRef(c.RemoteRef)
		if want[v] == nil {
			want[v] = map[string]int64{}
		}
		want[v][c.Currency] += c.Amount
	}
	if len(b.Unbudgeted) != len(want) {
		t.Fatalf("unbudgeted = %+v, want solo's vendors %v", b.Unbudgeted, want)
	}
	for _, row := range b.Unbudgeted {
		if row.Pipeline != "solo" {
			t.Errorf("unbudgeted lists %s, which a budget covers", row.Pipeline)
		}
		got := map[string]int64{}
		for _, m := range row.Spend {
			got[m.Currency] = m.Amount
		}
		if len(got) != len(want[row.Vendor]) {
			t.Errorf("solo at %q: %v, want %v", row.Vendor, row.Spend, want[row.Vendor])
		}
		for c, a := range want[row.Vendor] {
			if got[c] != a {
				t.Errorf("solo at %q in %s: %d, want %d", row.Vendor, c, got[c], a)
			}
		}
	}
	var buf strings.Builder
	if err := pageTemplate.ExecuteTemplate(&buf, "board", view{Board: b}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "<td>solo</td><td>covers</td><td>0.45 USD</td>") {
		t.Errorf("the page does not show solo's spend at covers:\n%s", buf.String())
	}
}

// A vendor name holding markup renders as text in the chart and its table.
func TestSpendChartRendersVendorsAsText(t *testing.T) {
	_, b, _ := spendFixture(t)
	var buf strings.Builder
	if err := pageTemplate.ExecuteTemplate(&buf, "board", view{Board: b}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if strings.Contains(html, xss) {
		t.Fatalf("the page holds the raw %s", xss)
	}
	chart := html[strings.Index(html, `<svg class="chart"`):]
	chart = chart[:strings.Index(chart, "</svg>")]
	escaped := "&lt;script&gt;alert(1)&lt;/script&gt;"
	if !strings.Contains(chart, "<title>"+escaped) {
		t.Errorf("the chart does not name the vendor as text:\n%s", chart)
	}
	if !strings.Contains(html, "<th>"+escaped+"</th>") {
		t.Errorf("the chart's table does not name the vendor as text:\n%s", html)
	}
}
