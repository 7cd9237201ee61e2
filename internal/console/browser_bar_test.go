//go:build unix

package console_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot/internal/allottest"
	"allot/internal/chromiumtest"
	"allot/internal/console"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// barScales are four budgets over one pipeline whose week forecasts
// 4,200 (7 daily runs of 600), with limits that make it 0 %, 50 %,
// 100 % and 600 % of each (at-0 covers a pipeline with no schedule).
const barScales = `
[[budget]]
name      = "at-0"
pipeline  = "idle"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 1000, currency = "USD" }

[[budget]]
name      = "at-50"
pipeline  = "daily"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 8400, currency = "USD" }

[[budget]]
name      = "at-100"
pipeline  = "daily"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 4200, currency = "USD" }

[[budget]]
name      = "at-600"
pipeline  = "daily"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 700, currency = "USD" }

[[pipeline]]
name   = "daily"
period = "day"
  [pipeline.schedule]
  cron = "0 9 * * *"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  max_cost = { amount = 600, currency = "USD" }

[[pipeline]]
name   = "idle"
period = "day"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  max_cost = { amount = 600, currency = "USD" }
`

// Each budget's bar is drawn to its limit, in a real browser: the limit
// mark is at the same place at 0 %, 50 %, 100 % and 600 % of it; the
// forecast the limit admits fills the bar up to its share of the limit;
// what it would refuse is drawn past the mark, cut at the bar's end, and
// said in words ("6 runs would wait for a raise") where there is any.
// Before, the bar was scaled to the forecast, so at 600 % the spend and
// the limit were a sliver and the forecast read as what would be billed.
func TestBrowserDrawsEachBudgetToItsLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	br := newBrowser(t)
	set, err := pipeline.Parse([]byte(barScales), "bar_scales")
	if err != nil {
		t.Fatal(err)
	}
	in := console.ReadInput{Ledger: ledgertest.New(t).Led, Pipelines: set, Now: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)}
	srv := httptest.NewServer(console.NewServer(in, nil))
	t.Cleanup(srv.Close)
	tab := br.open(t, srv.URL+"/")

	var drawn []struct {
		Name  string                `json:"name"`
		Rects map[string][2]float64 `json:"rects"` // class: x, width
		Limit float64               `json:"limit"`
		Text  string                `json:"text"`
	}
	raw := tab.evalRaw(t, `Array.from(document.querySelectorAll('.budget')).map(d => ({
		name: d.querySelector('h3').textContent.split(' ')[0],
		rects: Object.fromEntries(Array.from(d.querySelectorAll('svg.bar rect')).map(r => [r.getAttribute('class'), [r.getBBox().x, r.getBBox().width]])),
		limit: d.querySelector('svg.bar line.limit').getBBox().x,
		text: d.innerText}))`)
	if err := json.Unmarshal([]byte(raw), &drawn); err != nil {
		t.Fatalf("the bars as drawn: %v: %s", err, raw)
	}
	tab.screenshot(t, filepath.Join(chromiumtest.ArtifactDir(t), "budget-bars.png"))

	const limitX, end = console.BarLimitX, console.BarWidth
	admitted600 := limitX * 600 / 700 // one run of 600 fits in 700
	want := map[string]struct {
		upcoming, refused [2]float64
		words             string
	}{
		"at-0":   {[2]float64{0, 0}, [2]float64{0, 0}, ""},
		"at-50":  {[2]float64{0, limitX / 2}, [2]float64{limitX / 2, 0}, ""},
		"at-100": {[2]float64{0, limitX}, [2]float64{limitX, 0}, ""},
		"at-600": {[2]float64{0, admitted600}, [2]float64{admitted600, end - admitted600}, "6 runs would wait for a raise: 36.00 USD past what the limit admits (the bar is cut)."},
	}
	if len(drawn) != len(want) {
		t.Fatalf("the page draws %d budgets, want %d: %s", len(drawn), len(want), raw)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.01 }
	for _, d := range drawn {
		w, ok := want[d.Name]
		if !ok {
			t.Errorf("an unexpected budget %q", d.Name)
			continue
		}
		if !near(d.Limit, limitX) {
			t.Errorf("%s: the limit mark is at %.2f, want %.2f wherever the forecast is", d.Name, d.Limit, limitX)
		}
		for class, wantXW := range map[string][2]float64{"upcoming": w.upcoming, "refused": w.refused} {
			got := d.Rects[class]
			if !near(got[1], wantXW[1]) || (wantXW[1] > 0 && !near(got[0], wantXW[0])) {
				t.Errorf("%s: %s drawn at x %.2f, width %.2f; want x %.2f, width %.2f", d.Name, class, got[0], got[1], wantXW[0], wantXW[1])
			}
		}
		said := strings.Contains(d.Text, "would wait for a raise:")
		switch {
		case w.words == "" && said:
			t.Errorf("%s: the page says runs would wait, and none would:\n%s", d.Name, d.Text)
		case w.words != "" && !strings.Contains(d.Text, w.words):
			t.Errorf("%s: the page does not say %q:\n%s", d.Name, w.words, d.Text)
		}
	}
	// The figures beside the bar split the forecast the same way.
	board, err := console.Read(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range board.Money {
		if row.Budget == "at-600" && (row.Admitted != 1 || row.Refused != 6 || row.AdmittedAmount != 600 || row.RefusedAmount != 3600) {
			t.Errorf("at-600's forecast split = %d runs (%d) admitted, %d (%d) refused; want 1 (600) and 6 (3600)", row.Admitted, row.AdmittedAmount, row.Refused, row.RefusedAmount)
		}
	}
}

// Times are shown in the operator's browser zone, with UTC on hover: the
// board read at 2026-08-03T00:00:00Z reads "Aug 2, 2026, 08:00 PM EDT" in
// New York, and the time keeps its UTC instant in its title. Without the
// script (or before it runs) the page shows UTC, as before.
func TestBrowserShowsTimesInTheOperatorsZone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	br := newBrowser(t)
	set, err := pipeline.Parse([]byte(barScales), "bar_scales")
	if err != nil {
		t.Fatal(err)
	}
	in := console.ReadInput{Ledger: ledgertest.New(t).Led, Pipelines: set, Now: time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)}
	srv := httptest.NewServer(console.NewServer(in, nil))
	t.Cleanup(srv.Close)
	tab := br.open(t, srv.URL+"/")
	tab.call(t, "Emulation.setTimezoneOverride", map[string]any{"timezoneId": "America/New_York"}, nil)
	tab.call(t, "Emulation.setLocaleOverride", map[string]any{"locale": "en-US"}, nil)
	tab.call(t, "Page.reload", map[string]any{}, nil)
	const read = `(() => { const e = document.querySelector('#board time'); return e ? e.textContent + '|' + e.getAttribute('title') : ''; })()`
	deadline := allottest.Deadline(t, 30*time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got := tab.eval(t, read)
		shown, title, _ := strings.Cut(got, "|")
		if strings.Contains(shown, "EDT") {
			if shown != "Aug 2, 2026, 08:00 PM EDT" || title != "2026-08-03T00:00:00Z (UTC)" {
				t.Fatalf("the board's read time shows %q with title %q; want %q and the UTC instant on hover", shown, title, "Aug 2, 2026, 08:00 PM EDT")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the board's read time never showed in New York's zone: %q", got)
		}
		<-tick.C
	}
}
