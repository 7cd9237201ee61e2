package report

// Budgets as the operator sees them (invariant 20 of docs/design.md):
// `starter budget list|show`, the spend against each budget in stats and
// costs, and what check finds against them. Raising a limit and the
// forecast that runs and backfills ask consent for are operator's.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// BudgetPeriodView is one (budget, period): its limit, settled, reserved
// and free amounts, and the episodes parked on it.
type BudgetPeriodView struct {
	ledger.BudgetPeriod
	// Parked are the episodes ("<pipeline>/<episode>") whose step waits
	// for room in this period (BudgetExhausted).
	Parked []string `json:"parked"`
	// Outside is the spend its records leave out (OutsideRecords); only
	// one period's view (BudgetPeriod, budget show) reads it.
	Outside *OutsideSpend `json:"outside,omitempty"`
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

// BudgetNamed finds a budget of the pipeline file, or names the known ones.
func BudgetNamed(set *pipeline.Set, name string) (pipeline.Budget, error) {
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
		b, err := BudgetNamed(in.Pipelines, in.Budget)
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
		periods, err := led.BudgetPeriods(ctx, []ledger.BudgetLimit{ledger.LimitOf(b)})
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
			bp, err := led.BudgetPeriodOf(ctx, ledger.LimitOf(b), p)
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

// BudgetPeriod is one period of budget b with the episodes parked on it.
func BudgetPeriod(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, b pipeline.Budget, period string) (BudgetPeriodView, error) {
	bp, err := led.BudgetPeriodOf(ctx, ledger.LimitOf(b), period)
	if err != nil {
		return BudgetPeriodView{}, err
	}
	parked, err := parkedByPeriod(ctx, led, set)
	if err != nil {
		return BudgetPeriodView{}, err
	}
	outside, err := OutsideRecords(ctx, led, set, b, period)
	if err != nil {
		return BudgetPeriodView{}, err
	}
	return BudgetPeriodView{BudgetPeriod: bp, Parked: nonNilStrings(parked[b.Name][period]), Outside: &outside}, nil
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
	b, err := BudgetNamed(in.Pipelines, in.Budget)
	if err != nil {
		return BudgetShowResult{}, err
	}
	if err := b.CheckPeriod(in.Period); err != nil {
		return BudgetShowResult{}, &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	bp, err := BudgetPeriod(ctx, led, in.Pipelines, b, in.Period)
	if err != nil {
		return BudgetShowResult{}, err
	}
	v := viewOf(b)
	v.Periods = []BudgetPeriodView{bp}
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
		bps, err := led.BudgetPeriods(ctx, []ledger.BudgetLimit{ledger.LimitOf(b)})
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
