package operator

// Budgets as the operator sees them (invariant 20 of docs/design.md):
// `starter budget list|show|set-limit`, the spend against each budget in stats
// and costs, and consent counted in money for runs and backfills.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/ledger"
	"allot/pipeline"
)

// BudgetPeriodView is one (budget, period): its limit, settled, reserved
// and free amounts, and the episodes parked on it.
type BudgetPeriodView struct {
	ledger.BudgetPeriod
	// Parked are the episodes ("<pipeline>/<episode>") whose step waits
	// for room in this period (BudgetExhausted).
	Parked []string `json:"parked"`
}

// BudgetView is a budget of the pipeline file with its periods.
type BudgetView struct {
	Name     string              `json:"name"`
	Pipeline string              `json:"pipeline,omitempty"`
	Vendor   string              `json:"vendor,omitempty"`
	Period   pipeline.PeriodKind `json:"period"`
	TimeZone string              `json:"time_zone"`
	Limit    allot.Money         `json:"limit"`
	Alerts   []float64           `json:"alerts,omitempty"`
	Periods  []BudgetPeriodView  `json:"periods"`
}

// BudgetsInput selects budgets: every one, or one by name.
type BudgetsInput struct {
	Pipelines *pipeline.Set
	Budget    string
	// Now is the clock that names each budget's current period, which is
	// listed even when nothing was spent in it; zero: time.Now.
	Now time.Time
}

// BudgetsResult lists budgets and their periods.
type BudgetsResult struct {
	Budgets []BudgetView `json:"budgets"`
}

func limitOf(b pipeline.Budget) ledger.BudgetLimit {
	return ledger.BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}
}

// budget finds a budget of the pipeline file, or names the known ones.
func budget(set *pipeline.Set, name string) (pipeline.Budget, error) {
	b, ok := set.Budget(name)
	if !ok {
		known := strings.Join(set.BudgetNames(), ", ")
		if known == "" {
			known = "none"
		}
		return pipeline.Budget{}, allot.Errorf(allot.InvalidInput, "budget %q is not defined in the pipeline file: known budgets are %s", name, known)
	}
	return b, nil
}

// Budgets lists every budget (or one) with each period that has spending,
// reservations or a raise, and the current one; each period names the
// episodes parked on it.
func Budgets(ctx context.Context, led *ledger.Ledger, in BudgetsInput) (BudgetsResult, error) {
	budgets := in.Pipelines.Budgets()
	if in.Budget != "" {
		b, err := budget(in.Pipelines, in.Budget)
		if err != nil {
			return BudgetsResult{}, err
		}
		budgets = []pipeline.Budget{b}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	parked, err := parkedByPeriod(ctx, led, in.Pipelines)
	if err != nil {
		return BudgetsResult{}, err
	}
	out := BudgetsResult{Budgets: []BudgetView{}}
	for _, b := range budgets {
		v := viewOf(b)
		periods, err := led.BudgetPeriods(ctx, []ledger.BudgetLimit{limitOf(b)})
		if err != nil {
			return BudgetsResult{}, err
		}
		want := map[string]bool{b.PeriodOf(now): true}
		for p := range parked[b.Name] {
			want[p] = true
		}
		for _, p := range periods {
			delete(want, p.Period)
		}
		for p := range want {
			bp, err := led.BudgetPeriodOf(ctx, limitOf(b), p)
			if err != nil {
				return BudgetsResult{}, err
			}
			periods = append(periods, bp)
		}
		slices.SortFunc(periods, func(x, y ledger.BudgetPeriod) int { return strings.Compare(x.Period, y.Period) })
		for _, p := range periods {
			v.Periods = append(v.Periods, BudgetPeriodView{BudgetPeriod: p, Parked: nonNilStrings(parked[b.Name][p.Period])})
		}
		out.Budgets = append(out.Budgets, v)
	}
	return out, nil
}

func viewOf(b pipeline.Budget) BudgetView {
	return BudgetView{Name: b.Name, Pipeline: b.Pipeline, Vendor: b.Vendor, Period: b.Period, TimeZone: b.TimeZone, Limit: b.Limit, Alerts: b.Alerts, Periods: []BudgetPeriodView{}}
}

func nonNilStrings(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// parkedByPeriod maps budget -> period -> the episodes parked waiting for
// room in it: the planned step of each episode parked on BudgetExhausted,
// charged to every budget that covers it in its nominal time's period.
func parkedByPeriod(ctx context.Context, led *ledger.Ledger, set *pipeline.Set) (map[string]map[string][]string, error) {
	tasks, err := led.BudgetParked(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string][]string{}
	for _, t := range tasks {
		p, err := set.Get(t.Pipeline)
		if err != nil {
			continue // a pipeline the file no longer has
		}
		st, ok := p.Step(t.Step)
		if !ok {
			continue
		}
		for _, b := range set.BudgetsFor(p.Name, st) {
			period := b.PeriodOf(t.NominalTime)
			if out[b.Name] == nil {
				out[b.Name] = map[string][]string{}
			}
			ep := t.Pipeline + "/" + t.EpisodeID
			if !slices.Contains(out[b.Name][period], ep) {
				out[b.Name][period] = append(out[b.Name][period], ep)
			}
		}
	}
	return out, nil
}

// BudgetShowInput names one budget's period.
type BudgetShowInput struct {
	Pipelines *pipeline.Set
	Budget    string
	Period    string
}

// BudgetShowResult is one budget's period with the tasks that draw on it
// and its raises.
type BudgetShowResult struct {
	Budget BudgetView           `json:"budget"`
	Tasks  []ledger.BudgetEntry `json:"tasks"`
	Raises []ledger.BudgetRaise `json:"raises"`
}

// BudgetShow lists the tasks that draw on one budget's period: what each
// reserved, what it cost, and whether its reservation is held, settled or
// released; and the period's raises.
func BudgetShow(ctx context.Context, led *ledger.Ledger, in BudgetShowInput) (BudgetShowResult, error) {
	b, err := budget(in.Pipelines, in.Budget)
	if err != nil {
		return BudgetShowResult{}, err
	}
	if err := b.CheckPeriod(in.Period); err != nil {
		return BudgetShowResult{}, &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	bp, err := led.BudgetPeriodOf(ctx, limitOf(b), in.Period)
	if err != nil {
		return BudgetShowResult{}, err
	}
	parked, err := parkedByPeriod(ctx, led, in.Pipelines)
	if err != nil {
		return BudgetShowResult{}, err
	}
	v := viewOf(b)
	v.Periods = []BudgetPeriodView{{BudgetPeriod: bp, Parked: nonNilStrings(parked[b.Name][in.Period])}}
	tasks, err := led.BudgetEntries(ctx, b.Name, in.Period)
	if err != nil {
		return BudgetShowResult{}, err
	}
	raises, err := led.BudgetRaises(ctx, b.Name, in.Period)
	if err != nil {
		return BudgetShowResult{}, err
	}
	if tasks == nil {
		tasks = []ledger.BudgetEntry{}
	}
	if raises == nil {
		raises = []ledger.BudgetRaise{}
	}
	return BudgetShowResult{Budget: v, Tasks: tasks, Raises: raises}, nil
}

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
	Raise   ledger.BudgetRaise `json:"raise"`
	Applied bool               `json:"applied"`
	Period  BudgetPeriodView   `json:"period"`
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
	b, err := budget(in.Pipelines, in.Budget)
	if err != nil {
		return RaiseResult{}, err
	}
	bad := func(format string, args ...any) error {
		return allot.Errorf(allot.InvalidInput, format, args...)
	}
	switch {
	case b.CheckPeriod(in.Period) != nil:
		return RaiseResult{}, bad("%v", b.CheckPeriod(in.Period))
	case in.Limit <= 0 || in.Limit > pipeline.MaxBudgetLimit:
		return RaiseResult{}, bad("--limit %d is not between 1 and %d minor units of %s (%s is %d)", in.Limit, pipeline.MaxBudgetLimit, b.Limit.Currency, b.Limit, b.Limit.Amount)
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
	bp, err := led.BudgetPeriodOf(ctx, limitOf(b), in.Period)
	if err != nil {
		return RaiseResult{}, err
	}
	parked, err := parkedByPeriod(ctx, led, in.Pipelines)
	if err != nil {
		return RaiseResult{}, err
	}
	out := RaiseResult{Raise: r, Applied: applied, Period: BudgetPeriodView{BudgetPeriod: bp, Parked: nonNilStrings(parked[b.Name][in.Period])}, Nudge: []string{}}
	for _, ep := range out.Period.Parked {
		p, id, _ := strings.Cut(ep, "/")
		out.Nudge = append(out.Nudge, allot.EpisodeWorkflowID(p, id))
	}
	return out, nil
}

// BudgetsOfPipeline are the periods of the budgets that cover any step of
// a pipeline: the spend against each budget that stats and costs show.
// periods, when not nil, keeps only those periods of each budget.
func BudgetsOfPipeline(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, pipelineName string, periods func(pipeline.Budget) map[string]bool) ([]BudgetPeriodView, error) {
	if set == nil {
		return []BudgetPeriodView{}, nil
	}
	p, err := set.Get(pipelineName)
	if err != nil {
		return []BudgetPeriodView{}, nil // a pipeline only the ledger knows: no budget of the file covers it
	}
	out := []BudgetPeriodView{}
	for _, b := range set.Budgets() {
		if !slices.ContainsFunc(p.Steps, func(st pipeline.Step) bool { return b.Covers(p.Name, st) }) {
			continue
		}
		bps, err := led.BudgetPeriods(ctx, []ledger.BudgetLimit{limitOf(b)})
		if err != nil {
			return nil, err
		}
		var keep map[string]bool
		if periods != nil {
			keep = periods(b)
		}
		for _, bp := range bps {
			if keep == nil || keep[bp.Period] {
				out = append(out, BudgetPeriodView{BudgetPeriod: bp, Parked: []string{}})
			}
		}
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

// NeedsConsent: the forecast exceeds what is free, or cannot be bounded
// because a step is priced only by a quote (docs/design.md, "Backfills").
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
		var perRun int64
		var quoted []string
		covers := false
		for _, st := range p.Steps {
			if !b.Covers(p.Name, st) {
				continue
			}
			covers = true
			if st.MaxCost == nil {
				// Priced only by a quote when it is sent (the pipeline
				// file admits no other covered step without max_cost):
				// unknown, never counted as 0.
				quoted = append(quoted, st.Name)
				continue
			}
			if perRun, err = allot.AddAmount(perRun, st.MaxCost.Amount); err != nil {
				return nil, err
			}
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
				bp, err := led.BudgetPeriodOf(ctx, limitOf(b), period)
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

// costsBudgets: with a period, the budget periods its episodes' nominal
// times fall in; else every period.
func costsBudgets(ctx context.Context, led *ledger.Ledger, in CostsInput) ([]BudgetPeriodView, error) {
	if in.Period == "" {
		return BudgetsOfPipeline(ctx, led, in.Pipelines, in.Pipeline, nil)
	}
	eps, err := led.ListEpisodes(ctx, in.Pipeline, in.Period)
	if err != nil {
		return nil, err
	}
	return BudgetsOfPipeline(ctx, led, in.Pipelines, in.Pipeline, func(b pipeline.Budget) map[string]bool {
		keep := map[string]bool{}
		for _, e := range eps {
			keep[b.PeriodOf(e.NominalTime)] = true
		}
		return keep
	})
}

// missingReservations reports each open intent of a step that a budget of
// the pipeline file covers but that holds no reservation in it (in its
// episode's period): the budget does not count it. The ledger's audit
// checks the other way (every held reservation belongs to an intent).
func missingReservations(ctx context.Context, led *ledger.Ledger, in CheckInput, tasks []ledger.PaidTask) ([]ledger.Violation, error) {
	if in.Pipelines == nil || len(in.Pipelines.Budgets()) == 0 {
		return nil, nil
	}
	var out []ledger.Violation
	coverage := newTaskCoverage(led, in.Pipelines)
	for _, t := range tasks {
		if t.State != allot.PaidIntent || in.Pipeline != "" && t.Pipeline != in.Pipeline {
			continue
		}
		covering, ep, err := coverage.of(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(covering) == 0 {
			continue
		}
		entries, err := led.TaskBudgetEntries(ctx, t.PaidTaskRef)
		if err != nil {
			return nil, err
		}
		for _, b := range covering {
			period := b.PeriodOf(ep.NominalTime)
			if slices.ContainsFunc(entries, func(e ledger.BudgetEntry) bool {
				return e.Budget == b.Name && e.Period == period && e.State == ledger.EntryHeld
			}) {
				continue
			}
			out = append(out, ledger.Violation{Kind: ledger.KindReservationMissing, Pipeline: t.Pipeline, Episode: t.EpisodeID,
				Detail: fmt.Sprintf("paid task %s/%s step %q revision %d is an intent but holds no reservation in budget %s period %s, which covers it: the budget does not count it (it was written before the budget existed, or by hand); settle it (its cost is booked when it is adopted or its send is answered) or abandon it",
					t.Pipeline, t.EpisodeID, t.Step, t.Revision, b.Name, period)})
		}
	}
	return out, nil
}
