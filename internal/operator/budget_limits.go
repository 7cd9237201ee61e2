package operator

// Budgets as commands change them and consent reads them: `starter budget
// set-limit`, and the forecast in money that runs and backfills ask
// consent for (invariant 20 of docs/design.md). The budgets' views are
// report's.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/report"
	"allot/pipeline"
)

// checkTexts bounds an operator's free texts (flag, text pairs) with
// allot.CheckText, before anything is written or sent: InvalidInput.
func checkTexts(flagTexts ...string) error {
	for i := 0; i+1 < len(flagTexts); i += 2 {
		if err := allot.CheckText(flagTexts[i], flagTexts[i+1]); err != nil {
			return &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
		}
	}
	return nil
}

// RaiseInput is an operator's new limit for one budget's period.
type RaiseInput struct {
	Pipelines *pipeline.Set
	Budget    string
	Period    string
	Limit     int64 // minor units of the budget's currency
	Reason    string
	By        string
	// RequestID makes the raise idempotent: the same request again records
	// nothing more.
	RequestID string
}

// RaiseResult is the raise as recorded, the period after it, and the
// Episode workflows parked on the period, to nudge.
type RaiseResult struct {
	Raise   ledger.BudgetRaise      `json:"raise"`
	Applied bool                    `json:"applied"`
	Period  report.BudgetPeriodView `json:"period"`
	// Nudge are the workflow IDs of the episodes parked on this period:
	// the caller signals them so that they ask their budgets at once.
	Nudge []string `json:"nudge"`
	// Nudged and NotNudged are filled by the caller that signals.
	Nudged    []string `json:"nudged,omitempty"`
	NotNudged []string `json:"not_nudged,omitempty"`
}

// RaiseBudget sets the limit of one period of a budget of the pipeline
// file, higher or lower, with who and why; other periods keep theirs.
// Every check comes before anything is written: the budget, the period's
// form, a positive limit within bounds, a reason and a name within
// allot.MaxTextLen (who: allot.Actor); the ledger refuses a limit below
// what the period has settled and reserved, records nothing for the
// current limit, and refuses a request ID reused with other arguments
// (RequestConflict).
func RaiseBudget(ctx context.Context, led *ledger.Ledger, in RaiseInput) (RaiseResult, error) {
	b, err := report.BudgetNamed(in.Pipelines, in.Budget)
	if err != nil {
		return RaiseResult{}, err
	}
	bad := func(format string, args ...any) error {
		return allot.Errorf(allot.InvalidInput, format, args...)
	}
	switch {
	case b.CheckPeriod(in.Period) != nil:
		return RaiseResult{}, bad("%v", b.CheckPeriod(in.Period))
	case in.Limit <= 0 || in.Limit > allot.MaxBudgetLimit:
		return RaiseResult{}, bad("--limit %d is not between 1 and %d minor units of %s (%s is %d)", in.Limit, allot.MaxBudgetLimit, b.Limit.Currency, b.Limit, b.Limit.Amount)
	case strings.TrimSpace(in.Reason) == "":
		return RaiseResult{}, bad("a raise needs a reason: --reason TEXT")
	case allot.CheckText("--reason", in.Reason) != nil:
		return RaiseResult{}, bad("%v", allot.CheckText("--reason", in.Reason))
	case in.RequestID == "":
		return RaiseResult{}, bad("a raise needs a request ID")
	case allot.CheckText("--request-id", in.RequestID) != nil:
		return RaiseResult{}, bad("%v", allot.CheckText("--request-id", in.RequestID))
	}
	by, err := allot.Actor(in.By)
	if err != nil {
		return RaiseResult{}, bad("%v", err)
	}
	r, applied, err := led.RaiseBudget(ctx, ledger.BudgetRaise{RequestID: in.RequestID, Budget: b.Name, Period: in.Period, Limit: in.Limit,
		Currency: b.Limit.Currency, Reason: in.Reason, By: by, Configured: b.Limit.Amount})
	if errors.Is(err, ledger.ErrInvalidInput) {
		return RaiseResult{}, bad("%v", err)
	}
	if errors.Is(err, ledger.ErrRequestConflict) {
		return RaiseResult{}, &allot.Error{Type: allot.RequestConflict, Message: err.Error()}
	}
	if err != nil {
		return RaiseResult{}, err
	}
	period, err := report.BudgetPeriod(ctx, led, in.Pipelines, b, in.Period)
	if err != nil {
		return RaiseResult{}, err
	}
	out := RaiseResult{Raise: r, Applied: applied, Period: period, Nudge: []string{}}
	for _, ep := range out.Period.Parked {
		p, id, _ := strings.Cut(ep, "/")
		out.Nudge = append(out.Nudge, allot.EpisodeWorkflowID(p, id))
	}
	return out, nil
}

// BudgetForecast is what runs would reserve in one budget's period, beside
// what the period has free: consent counted in money.
type BudgetForecast struct {
	Budget   string `json:"budget"`
	Period   string `json:"period"`
	Currency string `json:"currency"`
	// Runs are the new episodes whose nominal times fall in the period;
	// PerRun is what one reserves at most (the sum of its covered steps'
	// max_cost); Forecast is Runs x PerRun.
	Runs     int   `json:"runs"`
	PerRun   int64 `json:"per_run"`
	Forecast int64 `json:"forecast"`
	// Free is the period's limit less what it has settled and reserved;
	// FreeKnown is false without a readable ledger (then Free is the
	// configured limit).
	Free      int64 `json:"free"`
	FreeKnown bool  `json:"free_known"`
	// Over: the forecast exceeds what is free.
	Over bool `json:"over"`
	// Quoted: some covered steps (QuotedSteps) have no max_cost and are
	// priced only by their vendor's quote when they are sent. Their price
	// is unknown before the run, so the forecast is no upper bound: it
	// needs consent as a forecast over what is free does (OverBudget).
	Quoted      bool     `json:"quoted,omitempty"`
	QuotedSteps []string `json:"quoted_steps,omitempty"`
}

// NeedsConsent reports whether the forecast exceeds what is free, or cannot
// be bounded because a step is priced only by a quote (docs/design.md,
// "Backfills").
func (f BudgetForecast) NeedsConsent() bool { return f.Over || f.Quoted }

func (f BudgetForecast) String() string {
	m := func(a int64) string { return allot.Money{Amount: a, Currency: f.Currency}.String() }
	s := fmt.Sprintf("budget %s period %s: %d runs x %s = %s, free %s", f.Budget, f.Period, f.Runs, m(f.PerRun), m(f.Forecast), m(f.Free))
	if !f.FreeKnown {
		s += " (the limit: the ledger was not read)"
	}
	if f.Over {
		s += ": OVER by " + m(f.Forecast-f.Free)
	}
	if f.Quoted {
		s += fmt.Sprintf(", plus UNKNOWN: step %s has no max_cost and is priced only by its vendor's quote (give it max_cost to forecast it)", strings.Join(f.QuotedSteps, ", "))
	}
	return s
}

// ForecastBudgets forecasts, for the runs of pipelineName at the nominal
// times given (new episodes), what they would reserve in each budget period
// against what it has free: an upper bound (each run's every covered paid
// step at its max_cost; the pipeline's cap may start fewer). led may be
// nil: free is then the configured limit.
func ForecastBudgets(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, pipelineName string, nominals []time.Time) ([]BudgetForecast, error) {
	p, err := set.Get(pipelineName)
	if err != nil {
		return nil, err
	}
	var out []BudgetForecast
	for _, b := range set.Budgets() {
		perRun, quoted, covers, err := b.PerRun(p)
		if err != nil {
			return nil, err
		}
		if !covers {
			continue
		}
		runs := map[string]int{}
		var order []string
		for _, t := range nominals {
			period := b.PeriodOf(t)
			if runs[period] == 0 {
				order = append(order, period)
			}
			runs[period]++
		}
		slices.Sort(order)
		for _, period := range order {
			f := BudgetForecast{Budget: b.Name, Period: period, Currency: b.Limit.Currency, Runs: runs[period], PerRun: perRun, Quoted: len(quoted) > 0, QuotedSteps: quoted, Free: b.Limit.Amount}
			if perRun > 0 && int64(f.Runs) > math.MaxInt64/perRun {
				f.Forecast = math.MaxInt64
			} else {
				f.Forecast = int64(f.Runs) * perRun
			}
			if led != nil {
				bp, err := led.BudgetPeriodOf(ctx, ledger.LimitOf(b), period)
				if err != nil {
					return nil, err
				}
				f.Free, f.FreeKnown = bp.Free, true
			}
			f.Over = f.Forecast > f.Free
			out = append(out, f)
		}
	}
	return out, nil
}

// OverBudget lists the forecasts that need consent: those that exceed what
// their periods have free, and those a quote-priced step leaves unknown.
func OverBudget(fs []BudgetForecast) []BudgetForecast {
	var out []BudgetForecast
	for _, f := range fs {
		if f.NeedsConsent() {
			out = append(out, f)
		}
	}
	return out
}

// backfillForecast forecasts the budgets of a backfill's runs: those whose
// keys have no episode yet (with a ledger; without one, every run).
func (s *Schedules) backfillForecast(ctx context.Context, pipelineName string, nominal []time.Time, keys []string, episodes map[string]int) ([]BudgetForecast, error) {
	if len(s.Pipelines.Budgets()) == 0 || len(nominal) == 0 {
		return nil, nil
	}
	fresh := nominal
	if episodes != nil && len(keys) == len(nominal) {
		fresh = nil
		for i, k := range keys {
			if episodes[k] == 0 {
				fresh = append(fresh, nominal[i])
			}
		}
	}
	return ForecastBudgets(ctx, s.Ledger, s.Pipelines, pipelineName, fresh)
}
