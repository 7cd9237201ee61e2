package console

// The spend chart and the unbudgeted spend (docs/design.md, "The operator
// page"): what the ledger recorded per UTC day and vendor over the last
// SpendDays days, and, for the paid steps no budget covers, what the
// calendar month (UTC) has settled per pipeline and vendor. Both come from
// one read of the ledger (SpendPerDay). Every amount stays integer minor
// units; only the chart's pixels are floats.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// SpendDays is how many UTC days the chart shows, today the last.
const SpendDays = 30

// SpendSeries is one vendor's recorded costs in one currency, per day of
// the chart (Board.SpendDays): a point per day, 0 on a day without costs.
type SpendSeries struct {
	Vendor   string
	Currency string
	Amounts  []int64 // one per Board.SpendDays
	Total    int64
}

// Money is an amount of the series as money in its currency.
func (s SpendSeries) Money(minor int64) allot.Money {
	return allot.Money{Amount: minor, Currency: s.Currency}
}

// SpendChart is one currency's chart: its series (a vendor each) and the
// day totals across them.
type SpendChart struct {
	Currency string
	Days     []string
	Series   []SpendSeries
	Totals   []int64 // one per day
}

// Money is an amount of the chart as money in its currency.
func (c SpendChart) Money(minor int64) allot.Money {
	return allot.Money{Amount: minor, Currency: c.Currency}
}

// UnbudgetedRow is what a pipeline's paid steps at one vendor that no
// budget covers have settled this calendar month (UTC), by currency;
// empty when nothing was recorded yet.
type UnbudgetedRow struct {
	Pipeline string
	Vendor   string
	Spend    []allot.Money
}

// Chart geometry, in pixels.
const (
	chartStep   = 16.0 // one day's slot
	chartBar    = 12.0 // its bar
	chartHeight = 100.0
	chartPad    = 12.0 // each side, for the outer day labels
	// ChartWidth and ChartHeight are the SVG's size: the plot and a row
	// of day labels below it.
	ChartWidth  = SpendDays*chartStep + 2*chartPad
	ChartHeight = chartHeight + 18
)

// ChartRect is one vendor's part of one day's bar; Title says it in words.
type ChartRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// ChartLabel is a day label under the bars.
type ChartLabel struct {
	X    float64
	Text string
}

// seriesClasses are the CSS classes of the series, in turn.
const seriesClasses = 6

// SeriesClass is the CSS class of the i-th series (style.css colours it).
func SeriesClass(i int) string { return fmt.Sprintf("series-%d", i%seriesClasses) }

// Rects draws the chart's stacked bars on the scale of its highest day.
func (c SpendChart) Rects() []ChartRect {
	top := float64(max(slices.Max(append([]int64{1}, c.Totals...)), 1))
	var out []ChartRect
	for d := range c.Days {
		y := chartHeight
		for i, s := range c.Series {
			if s.Amounts[d] == 0 {
				continue
			}
			h := chartHeight * float64(s.Amounts[d]) / top
			y -= h
			out = append(out, ChartRect{X: chartPad + float64(d)*chartStep + (chartStep-chartBar)/2, Y: y, W: chartBar, H: h,
				Class: SeriesClass(i), Title: fmt.Sprintf("%s, %s: %s", s.Vendor, c.Days[d], s.Money(s.Amounts[d]))})
		}
	}
	return out
}

// Labels are the day labels: sparse (every week, counted back from today)
// so they stay readable.
func (c SpendChart) Labels() []ChartLabel {
	var out []ChartLabel
	for d := range c.Days {
		if (len(c.Days)-1-d)%7 != 0 {
			continue
		}
		out = append(out, ChartLabel{X: chartPad + float64(d)*chartStep + chartStep/2, Text: c.Days[d][5:]})
	}
	return out
}

// Width and Height are the SVG's size.
func (SpendChart) Width() float64  { return ChartWidth }
func (SpendChart) Height() float64 { return ChartHeight }

// LabelY is the baseline of the day labels.
func (SpendChart) LabelY() float64 { return ChartHeight - 4 }

// Highest is the highest day total: the top of the chart's scale.
func (c SpendChart) Highest() allot.Money {
	return c.Money(slices.Max(append([]int64{0}, c.Totals...)))
}

// chartDays are the SpendDays UTC days ending with now's, oldest first.
func chartDays(now time.Time) []string {
	today := now.UTC().Truncate(24 * time.Hour)
	days := make([]string, SpendDays)
	for i := range days {
		days[i] = today.AddDate(0, 0, i-(SpendDays-1)).Format(ledger.DayLayout)
	}
	return days
}

// monthStart is the first instant of now's calendar month in UTC.
func monthStart(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// vendorOf is the vendor of a cost: its pinned plan's, else (a plan that
// names none) the pipeline file's step's, else the default vendor.
func (r *reader) vendorOf(s ledger.DaySpend) string {
	if s.Vendor != "" {
		return s.Vendor
	}
	if p, err := r.in.Pipelines.Get(s.Pipeline); err == nil {
		if st, ok := p.Step(s.Step); ok {
			return st.VendorName()
		}
	}
	return pipeline.DefaultVendor
}

// covered reports whether a budget covers the cost's step: the pipeline
// file's step, or, for a step the file no longer has, a paid step at the
// cost's vendor.
func (r *reader) covered(s ledger.DaySpend, vendor string) bool {
	st := pipeline.Step{Name: s.Step, Kind: allot.KindPaid, Vendor: vendor}
	if p, err := r.in.Pipelines.Get(s.Pipeline); err == nil {
		if fst, ok := p.Step(s.Step); ok {
			st = fst
		}
	}
	return len(r.in.Pipelines.BudgetsFor(s.Pipeline, st)) > 0
}

// spend reads the chart and the unbudgeted spend with one ledger read.
func (r *reader) spend(ctx context.Context) error {
	b := r.board
	b.SpendDays = chartDays(r.now)
	month := monthStart(r.now)
	b.UnbudgetedMonth = month.Format("2006-01")
	chartStart, err := time.Parse(ledger.DayLayout, b.SpendDays[0])
	if err != nil {
		return err
	}
	// The month starts before the chart's first day on the 31st only.
	since := chartStart
	if month.Before(since) {
		since = month
	}
	rows, err := r.in.Ledger.SpendPerDay(ctx, since)
	if err != nil {
		return err
	}
	dayIndex := map[string]int{}
	for i, d := range b.SpendDays {
		dayIndex[d] = i
	}
	type seriesKey struct{ vendor, currency string }
	type unbudgetedKey struct{ pipeline, vendor string }
	var (
		series     = map[seriesKey]*SpendSeries{}
		unbudgeted = map[unbudgetedKey]map[string]int64{}
		today      = b.SpendDays[len(b.SpendDays)-1]
		monthDay   = month.Format(ledger.DayLayout)
	)
	// Every pipeline and vendor with a paid step no budget covers has a
	// row, spent or not: a team without budgets sees where money can go.
	for _, name := range r.in.Pipelines.Names() {
		p, err := r.in.Pipelines.Get(name)
		if err != nil {
			return err
		}
		for _, st := range p.Steps {
			if st.Kind == allot.KindPaid && len(r.in.Pipelines.BudgetsFor(name, st)) == 0 {
				k := unbudgetedKey{name, st.VendorName()}
				if unbudgeted[k] == nil {
					unbudgeted[k] = map[string]int64{}
				}
			}
		}
	}
	for _, s := range rows {
		vendor := r.vendorOf(s)
		if i, ok := dayIndex[s.Day]; ok {
			k := seriesKey{vendor, s.Currency}
			sr := series[k]
			if sr == nil {
				sr = &SpendSeries{Vendor: vendor, Currency: s.Currency, Amounts: make([]int64, len(b.SpendDays))}
				series[k] = sr
			}
			if sr.Amounts[i], err = allot.AddAmount(sr.Amounts[i], s.Amount); err != nil {
				return fmt.Errorf("the spend at %s on %s in %s: %w", vendor, s.Day, s.Currency, err)
			}
			if sr.Total, err = allot.AddAmount(sr.Total, s.Amount); err != nil {
				return fmt.Errorf("the spend at %s over %d days in %s: %w", vendor, SpendDays, s.Currency, err)
			}
		}
		if s.Day >= monthDay && s.Day <= today && !r.covered(s, vendor) {
			k := unbudgetedKey{s.Pipeline, vendor}
			if unbudgeted[k] == nil {
				unbudgeted[k] = map[string]int64{}
			}
			if err := allot.AddTo(unbudgeted[k], allot.Money{Amount: s.Amount, Currency: s.Currency}); err != nil {
				return fmt.Errorf("the unbudgeted spend of %s at %s in %s: %w", s.Pipeline, vendor, b.UnbudgetedMonth, err)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(series), func(a, b seriesKey) int {
		return cmpPair(a.currency, a.vendor, b.currency, b.vendor)
	}) {
		b.Spend = append(b.Spend, *series[k])
	}
	for _, s := range b.Spend {
		if n := len(b.SpendCharts); n == 0 || b.SpendCharts[n-1].Currency != s.Currency {
			b.SpendCharts = append(b.SpendCharts, SpendChart{Currency: s.Currency, Days: b.SpendDays, Totals: make([]int64, len(b.SpendDays))})
		}
		c := &b.SpendCharts[len(b.SpendCharts)-1]
		c.Series = append(c.Series, s)
		for i, a := range s.Amounts {
			if c.Totals[i], err = allot.AddAmount(c.Totals[i], a); err != nil {
				return fmt.Errorf("the spend on %s in %s: %w", b.SpendDays[i], s.Currency, err)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(unbudgeted), func(a, b unbudgetedKey) int {
		return cmpPair(a.pipeline, a.vendor, b.pipeline, b.vendor)
	}) {
		row := UnbudgetedRow{Pipeline: k.pipeline, Vendor: k.vendor}
		for _, c := range slices.Sorted(maps.Keys(unbudgeted[k])) {
			row.Spend = append(row.Spend, allot.Money{Amount: unbudgeted[k][c], Currency: c})
		}
		b.Unbudgeted = append(b.Unbudgeted, row)
	}
	return nil
}

func cmpPair(a1, a2, b1, b2 string) int {
	if n := strings.Compare(a1, b1); n != 0 {
		return n
	}
	return strings.Compare(a2, b2)
}
