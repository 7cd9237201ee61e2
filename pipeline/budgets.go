package pipeline

// Budgets: money caps per period over a pipeline, a vendor, or a pipeline
// at one vendor (invariant 20 of docs/design.md). A paid task reserves its
// price in every budget that covers it, in the ledger transaction that
// writes its intent, and is sent only if every one of them has room.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"allot"
)

// Month buckets by calendar month, e.g. 2026-08. Budgets only: a
// pipeline's episodes count in days or ISO weeks.
const Month PeriodKind = "month"

// checkMoney refuses an amount that is not positive or above max, and a
// currency that is not an ISO 4217 code.
func checkMoney(m allot.Money, what string, max int64) error {
	if err := allot.CheckCurrency(m.Currency); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if m.Amount <= 0 || m.Amount > max {
		return fmt.Errorf("%s: amount %d is not between 1 and %d minor units (amounts are integers in the currency's smallest unit: 250 = %s)",
			what, m.Amount, max, allot.Money{Amount: 250, Currency: m.Currency})
	}
	return nil
}

// Budget is a [[budget]] of the pipeline file: a money limit per period
// over the paid tasks of one pipeline, of one vendor, or of a pipeline at
// one vendor.
type Budget struct {
	Name string `toml:"name" json:"name"`
	// Pipeline and Vendor are its scope; at least one is set. A step with
	// no vendor is the default vendor's ("default").
	Pipeline string      `toml:"pipeline" json:"pipeline,omitempty"`
	Vendor   string      `toml:"vendor" json:"vendor,omitempty"`
	Period   PeriodKind  `toml:"period" json:"period"`
	TimeZone string      `toml:"time_zone" json:"time_zone"`
	Limit    allot.Money `toml:"limit" json:"limit"`
	// Alerts are soft thresholds, fractions of the limit in (0, 1) in
	// ascending order: settled spend crossing one is logged and counted,
	// once per threshold and period.
	Alerts []float64 `toml:"alerts" json:"alerts,omitempty"`
	// HoldScheduled: the budget holds, in each period, what the scheduled
	// runs still due in it will reserve, so that manual runs, backfills
	// and retries spend only the rest (docs/design.md, "Scheduled work
	// funded first"). Off unless set: a hold refuses manual work a budget
	// admits today, on a forecast its owner should have read first.
	HoldScheduled bool `toml:"hold_scheduled" json:"hold_scheduled,omitempty"`

	location *time.Location
}

// Location is the budget's time zone.
func (b Budget) Location() *time.Location {
	if b.location == nil {
		return time.UTC
	}
	return b.location
}

// PeriodOf is the budget period the nominal time t falls in, in the
// budget's zone: "2026-08-07", "2026-W32" or "2026-08". It is always an
// episode's nominal time, never the wall clock: a backfill of last month
// draws on last month's budget.
func (b Budget) PeriodOf(t time.Time) string {
	return PeriodOf(b.Period, t.In(b.Location()))
}

// AlertBasisPoints are the alerts in hundredths of a percent (0.5 is
// 5000), as the ledger records crossed thresholds.
func (b Budget) AlertBasisPoints() []int {
	out := make([]int, len(b.Alerts))
	for i, a := range b.Alerts {
		out[i] = int(math.Round(a * 10000))
	}
	return out
}

// Covers reports whether the budget covers step st of pipeline
// pipelineName: in its scope, and a paid step (an effect step only when it
// declares a max_cost; otherwise it reserves nothing).
func (b Budget) Covers(pipelineName string, st Step) bool {
	if !st.Kind.Remote() || st.Kind == Effect && st.MaxCost == nil {
		return false
	}
	if b.Pipeline != "" && b.Pipeline != pipelineName {
		return false
	}
	return b.Vendor == "" || b.Vendor == st.VendorName()
}

// VendorName is the vendor a paid or effect step uses: its vendor, or
// DefaultVendor.
func (s Step) VendorName() string {
	if s.Vendor == "" {
		return DefaultVendor
	}
	return s.Vendor
}

func (b *Budget) normalize() error {
	if !namePattern.MatchString(b.Name) {
		return fmt.Errorf("budget name %q is invalid: use 1-63 lowercase letters, digits and '-', starting with a letter or digit (pattern %s)", b.Name, namePattern)
	}
	if b.Pipeline == "" && b.Vendor == "" {
		return fmt.Errorf("budget %q has no scope: give pipeline = \"NAME\", vendor = \"NAME\", or both", b.Name)
	}
	switch b.Period {
	case Day, ISOWeek, Month:
	case "":
		return fmt.Errorf("budget %q has no period: give period = %q, %q or %q", b.Name, Day, ISOWeek, Month)
	default:
		return fmt.Errorf("budget %q: period %q is unknown: use %q, %q or %q", b.Name, b.Period, Day, ISOWeek, Month)
	}
	if b.TimeZone == "" {
		b.TimeZone = "UTC"
	}
	loc, err := time.LoadLocation(b.TimeZone)
	if err == nil && loc == time.Local {
		err = errors.New(`"Local" is the host's zone, not a named one`)
	}
	if err != nil {
		return fmt.Errorf("budget %q: time_zone %q is not an IANA zone name (e.g. \"Europe/Berlin\"): %v", b.Name, b.TimeZone, err)
	}
	b.location = loc
	if err := checkMoney(b.Limit, fmt.Sprintf("budget %q: limit", b.Name), allot.MaxBudgetLimit); err != nil {
		return err
	}
	for i, a := range b.Alerts {
		switch {
		case math.IsNaN(a) || a <= 0 || a >= 1:
			return fmt.Errorf("budget %q: alert %v is not a fraction of the limit between 0 and 1 (0.8 alerts at 80 %%)", b.Name, a)
		case i > 0 && a <= b.Alerts[i-1]:
			return fmt.Errorf("budget %q: alerts %v are not in ascending order without repeats: write them like [0.5, 0.8]", b.Name, b.Alerts)
		case math.Abs(math.Round(a*10000)-a*10000) > 1e-6:
			return fmt.Errorf("budget %q: alert %v is finer than a hundredth of a percent", b.Name, a)
		}
	}
	return nil
}

// checkBudgets checks the budgets against the pipelines and vendors: each
// scope names what exists; every paid step a budget covers has a price to
// reserve (max_cost, or an activity adapter's quote) in the budget's
// currency, and a max_cost within the budget's limit. No amount is ever
// converted between currencies.
func (s *Set) checkBudgets() error {
	seen := map[string]bool{}
	for _, b := range s.budgets {
		if seen[b.Name] {
			return fmt.Errorf("budget %q is defined twice", b.Name)
		}
		seen[b.Name] = true
		if b.Pipeline != "" {
			if _, ok := s.byName[b.Pipeline]; !ok {
				return fmt.Errorf("budget %q covers pipeline %q, which is not defined (known: %s)", b.Name, b.Pipeline, strings.Join(s.names, ", "))
			}
		}
		if b.Vendor != "" && b.Vendor != DefaultVendor {
			if _, ok := s.vendors[b.Vendor]; !ok {
				return fmt.Errorf("budget %q covers vendor %q, which is not defined: name a [[vendor]] (known: %s) or %q for steps without one",
					b.Name, b.Vendor, strings.Join(s.VendorNames(), ", "), DefaultVendor)
			}
		}
		for _, name := range s.names {
			p := s.byName[name]
			// The episode's covered steps are admitted together at its
			// first paid step (docs/design.md, "An episode is paid for
			// whole"): their max_costs added must fit the limit too.
			var episode int64
			var priced []string
			for _, st := range p.Steps {
				if !b.Covers(p.Name, st) {
					continue
				}
				if st.MaxCost == nil {
					if v, ok := s.vendors[st.Vendor]; ok && v.Adapter == AdapterActivity && v.Activities.Quote != "" {
						continue // the quote is the reservation
					}
					return fmt.Errorf("pipeline %q: paid step %q is under budget %q but declares no price: add max_cost = { amount = N, currency = %q } (the most one task may cost, in minor units), or give its vendor an activity adapter with activities.quote",
						p.Name, st.Name, b.Name, b.Limit.Currency)
				}
				if st.MaxCost.Currency != b.Limit.Currency {
					return fmt.Errorf("pipeline %q: step %q costs %s but budget %q counts %s: amounts are never converted; give the budget or the step's max_cost the same currency, or scope the budget so it does not cover the step",
						p.Name, st.Name, st.MaxCost.Currency, b.Name, b.Limit.Currency)
				}
				// Every covering budget must admit a task before it is
				// sent (invariant 20 of docs/design.md): a price above a
				// limit would park every episode of the step for ever.
				if st.MaxCost.Amount > b.Limit.Amount {
					return fmt.Errorf("pipeline %q: step %q has max_cost %s, above the limit of %s of budget %q that covers it: every budget that covers a task must admit its max_cost, so no task of the step could ever be sent; lower the step's max_cost to at most %s, or raise budget %q's limit in the pipeline file to at least %s",
						p.Name, st.Name, *st.MaxCost, b.Limit, b.Name, b.Limit, b.Name, *st.MaxCost)
				}
				sum, err := allot.AddAmount(episode, st.MaxCost.Amount)
				if err != nil {
					return fmt.Errorf("pipeline %q: the max_costs of the steps budget %q covers add up beyond what int64 minor units hold", p.Name, b.Name)
				}
				episode, priced = sum, append(priced, st.Name)
			}
			if episode > b.Limit.Amount {
				whole := allot.Money{Amount: episode, Currency: b.Limit.Currency}
				return fmt.Errorf("pipeline %q: the steps budget %q covers (%s) have max_costs adding up to %s, above its limit of %s: an episode's covered steps are reserved together at its first paid step, so no episode could ever be admitted; lower their max_costs to add up to at most %s, or raise budget %q's limit in the pipeline file to at least %s",
					p.Name, b.Name, strings.Join(priced, ", "), whole, b.Limit, b.Limit, b.Name, whole)
			}
		}
	}
	return nil
}

// Budgets lists the budgets in file order.
func (s *Set) Budgets() []Budget { return append([]Budget(nil), s.budgets...) }

// Budget returns the named budget.
func (s *Set) Budget(name string) (Budget, bool) {
	for _, b := range s.budgets {
		if b.Name == name {
			return b, true
		}
	}
	return Budget{}, false
}

// BudgetNames lists the budgets' names in file order.
func (s *Set) BudgetNames() []string {
	out := make([]string, len(s.budgets))
	for i, b := range s.budgets {
		out[i] = b.Name
	}
	return out
}

// BudgetsFor lists the budgets that cover step st of pipeline pipelineName.
func (s *Set) BudgetsFor(pipelineName string, st Step) []Budget {
	var out []Budget
	for _, b := range s.budgets {
		if b.Covers(pipelineName, st) {
			out = append(out, b)
		}
	}
	return out
}

// MaxCostOf is the max_cost of a step as the episode's pinned plan has it,
// or, for a plan pinned before max_cost existed, as the pipeline file has
// it now; nil if neither declares one.
func (s *Set) MaxCostOf(pipelineName string, pinned Step) *allot.Money {
	if pinned.MaxCost != nil {
		return pinned.MaxCost
	}
	if p, ok := s.byName[pipelineName]; ok {
		if st, ok := p.Step(pinned.Name); ok && st.Kind == pinned.Kind {
			return st.MaxCost
		}
	}
	return nil
}

// CheckPeriod refuses text that is not one of the budget's periods in
// canonical form: "2026-08-07" (day), "2026-W32" (iso-week), "2026-08"
// (month) (CheckPeriodOf).
func (b Budget) CheckPeriod(period string) error {
	return CheckPeriodOf(b.Period, "budget "+b.Name, period)
}

// BudgetPeriodKindOf is the kind of budget period the text is, by its
// form: "2026-08-07" a day, "2026-W32" an ISO week, "2026-08" a month.
func BudgetPeriodKindOf(period string) (PeriodKind, bool) {
	for _, k := range []PeriodKind{Day, ISOWeek, Month} {
		if CheckPeriodOf(k, "", period) == nil {
			return k, true
		}
	}
	return "", false
}

// PeriodBounds are the start and the end (exclusive) of one of the
// budget's periods, in its zone: midnight to midnight, on calendar days
// (a day across a DST change is 23 or 25 hours long).
func (b Budget) PeriodBounds(period string) (start, end time.Time, err error) {
	if err := b.CheckPeriod(period); err != nil {
		return time.Time{}, time.Time{}, err
	}
	loc := b.Location()
	switch b.Period {
	case Day:
		t, _ := time.Parse("2006-01-02", period)
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		return start, time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc), nil
	case Month:
		t, _ := time.Parse("2006-01", period)
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		return start, time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc), nil
	}
	var year, week int
	_, _ = fmt.Sscanf(period, "%4d-W%2d", &year, &week)
	jan4 := time.Date(year, time.January, 4, 0, 0, 0, 0, time.UTC)
	monday := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+(week-1)*7)
	start = time.Date(monday.Year(), monday.Month(), monday.Day(), 0, 0, 0, 0, loc)
	return start, time.Date(monday.Year(), monday.Month(), monday.Day()+7, 0, 0, 0, 0, loc), nil
}

// PerRun is what one episode of p reserves in the budget at most: the sum
// of its covered steps' max_cost. Quoted are its covered steps without a
// max_cost (priced only by the vendor's quote when sent: unknown, never
// counted as 0); covers is false when the budget covers no step of p.
func (b Budget) PerRun(p *Pipeline) (perRun int64, quoted []string, covers bool, err error) {
	for _, st := range p.Steps {
		if !b.Covers(p.Name, st) {
			continue
		}
		covers = true
		if st.MaxCost == nil {
			quoted = append(quoted, st.Name)
			continue
		}
		if perRun, err = allot.AddAmount(perRun, st.MaxCost.Amount); err != nil {
			return 0, nil, true, fmt.Errorf("budget %s: the steps of pipeline %s: %w", b.Name, p.Name, err)
		}
	}
	return perRun, quoted, covers, nil
}
