package activities

// Budgets (invariant 20 of docs/design.md): what a paid task reserves, in
// which budgets and periods, and how a refusal parks its episode.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// MetricBudgetAlerts counts soft thresholds crossed, once per threshold
// and period (budget, period, threshold).
const MetricBudgetAlerts = "allot_budget_alerts"

// SubmissionBudgetExhausted means a budget refused the task; nothing was
// sent.
const SubmissionBudgetExhausted = "budget_exhausted"

// covering is the step as budgets see it and the budgets that cover it: a
// plan pinned before max_cost existed takes the pipeline file's.
func (a *Activities) covering(p *pipeline.Pipeline, st pipeline.Step) (pipeline.Step, []pipeline.Budget) {
	if st.MaxCost == nil {
		st.MaxCost = a.Pipelines.MaxCostOf(p.Name, st)
	}
	return st, a.Pipelines.BudgetsFor(p.Name, st)
}

// mayQuote reports whether the step's vendor can price a task before it is
// sent: an activity adapter with a quote activity, or a Go adapter (which
// may implement paidvendor.Quoter; the driver finds out).
func (a *Activities) mayQuote(st pipeline.Step) bool {
	v, ok := a.Pipelines.Vendor(st.Vendor)
	return ok && (v.Adapter == pipeline.AdapterActivity && v.Activities.Quote != "" || v.Adapter == pipeline.AdapterGo)
}

// admission is what the task must hold if it becomes an intent now: one
// reservation per covering budget, in the period of the episode's nominal
// time, of the vendor's quote, else the step's max_cost. Covered says that
// budgets cover the task at all; the ledger then refuses to make it an
// intent without reservations (ledger.WriteIntentAdmitted), so the decision
// never rests on an earlier read of the task. A task read past planned
// (an intent reserved already) is priced only when that needs no quote:
// if it moved back to planned since, the ledger refuses the empty
// admission and PaidPrepare prices it again. quote says to ask the vendor
// for a price first.
func (a *Activities) admission(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, in PaidPhaseInput) (adm ledger.Admission, quote bool, err error) {
	st, budgets := a.covering(p, st)
	if len(budgets) == 0 {
		return ledger.Admission{}, false, nil
	}
	adm.Covered = true
	// pastPlanned reads whether the task was past planned when asked: such
	// a task is neither quoted nor parked for its price again.
	pastPlanned := func() (bool, error) {
		t, err := a.Ledger.PaidTask(ctx, ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision})
		switch {
		case errors.Is(err, ledger.ErrPaidTaskNotFound):
			return false, nil
		case err != nil:
			return false, classify(err)
		}
		return t.State != allot.PaidPlanned, nil
	}
	var price allot.Money
	switch {
	case in.Quote != nil:
		price = allot.Money{Amount: in.Quote.Amount, Currency: in.Quote.Currency}
		if st.MaxCost != nil && (price.Currency != st.MaxCost.Currency || price.Amount > st.MaxCost.Amount) {
			return adm, false, a.unpriced(ctx, p, ep, st, in.Revision, fmt.Sprintf("the vendor quoted %s, above the step's max_cost of %s: nothing was reserved or sent; raise max_cost in the pipeline file (new episodes) and retry, or abandon the step", price, *st.MaxCost))
		}
		if price.Amount < 0 || price.Amount > allot.MaxBudgetLimit || allot.CheckCurrency(price.Currency) != nil {
			return adm, false, a.unpriced(ctx, p, ep, st, in.Revision, fmt.Sprintf("the vendor quoted %d %q, which is not an amount of money to reserve: nothing was reserved or sent", price.Amount, price.Currency))
		}
	case !in.NoQuote && a.mayQuote(st):
		past, err := pastPlanned()
		if err != nil || past {
			return adm, false, err
		}
		return adm, true, nil
	case st.MaxCost != nil:
		price = *st.MaxCost
	default:
		past, err := pastPlanned()
		if err != nil || past {
			return adm, false, err
		}
		return adm, false, a.unpriced(ctx, p, ep, st, in.Revision, fmt.Sprintf("budget %s covers it but it has no max_cost and its vendor gave no quote: nothing was reserved or sent; add max_cost to step %s of pipeline %s in the pipeline file, restart the workers and retry, or abandon the step", budgets[0].Name, st.Name, p.Name))
	}
	for _, b := range budgets {
		if price.Currency != b.Limit.Currency {
			return adm, false, a.unpriced(ctx, p, ep, st, in.Revision, fmt.Sprintf("the price %s is not in budget %s's currency %s, and amounts are never converted: nothing was reserved or sent", price, b.Name, b.Limit.Currency))
		}
		adm.Reservations = append(adm.Reservations, allot.Reservation{Budget: b.Name, Period: b.PeriodOf(ep.NominalTime), Currency: b.Limit.Currency, Limit: b.Limit.Amount, Amount: price.Amount})
	}
	if in.Revision == 0 {
		adm.Later = a.laterTasks(p, ep, st)
	}
	return adm, false, nil
}

// laterTasks are the covered paid steps after st in the episode's plan,
// each at its max_cost, to be reserved with st (docs/design.md, "An
// episode is paid for whole"): a budget then admits the whole episode or
// none of it. A later step with no max_cost (priced by its quote alone), or
// one in another currency than a budget's, is left to its own admission,
// and may park there. Only first revisions: a reworked step is admitted
// alone.
func (a *Activities) laterTasks(p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step) []ledger.LaterTask {
	i := slices.IndexFunc(p.Steps, func(s pipeline.Step) bool { return s.Name == st.Name })
	if i < 0 {
		return nil
	}
	var out []ledger.LaterTask
	for _, next := range p.Steps[i+1:] {
		if !next.Kind.Remote() {
			continue
		}
		next, budgets := a.covering(p, next)
		if len(budgets) == 0 || next.MaxCost == nil {
			continue
		}
		lt := ledger.LaterTask{Ref: ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: next.Name},
			IdempotencyKey: allot.IdempotencyKey(p.Name, ep.ID, next.Name, 0)}
		for _, b := range budgets {
			if next.MaxCost.Currency != b.Limit.Currency {
				lt.Reservations = nil
				break
			}
			lt.Reservations = append(lt.Reservations, allot.Reservation{Budget: b.Name, Period: b.PeriodOf(ep.NominalTime), Currency: b.Limit.Currency, Limit: b.Limit.Amount, Amount: next.MaxCost.Amount})
		}
		if len(lt.Reservations) > 0 {
			out = append(out, lt)
		}
	}
	return out
}

// unpriced parks a task no budget can be asked for: no price, or one it
// cannot take. Raising a budget does not help; retry once fixed, or abandon.
// The task is written planned (if new), so that the operator's retry and
// abandon apply to it.
func (a *Activities) unpriced(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, revision int, why string) error {
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: revision}
	t, err := a.Ledger.WritePlanned(ctx, ref, allot.IdempotencyKey(p.Name, ep.ID, st.Name, revision))
	if err != nil {
		return classify(err)
	}
	countSubmission(ctx, p.Name, st.Name, SubmissionBudgetExhausted)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("paid task %s/%s step %s: %s", p.Name, ep.ID, st.Name, why),
		allot.BudgetExhausted, nil, ParkDetails{TaskState: t.State})
}

// budgetExhausted is the refusal of the budgets as the episode parks on
// it: what each budget has, and the remedies.
func (a *Activities) budgetExhausted(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, err error) error {
	var be *ledger.BudgetExhaustedError
	if !errors.As(err, &be) {
		return classify(err)
	}
	countSubmission(ctx, p.Name, st.Name, SubmissionBudgetExhausted)
	parts := make([]string, len(be.Shortfalls))
	for i, s := range be.Shortfalls {
		parts[i] = s.String()
	}
	activity.GetLogger(ctx).Warn("budget exhausted: the paid task is not sent", "step", st.Name, "revision", be.Task.Revision, "budgets", strings.Join(parts, "; "))
	// A budget's refusal is expected operation, not a failure: the
	// episode parks and shows it, and resumes by itself once the budget has
	// room (docs/design.md, "Budgets"). Without waitCategory the SDK would
	// log every park as an activity ERROR and count a failed activity.
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("paid task %s/%s step %s revision %d is not sent: %s. Raise the budget (the episode resumes by itself once it fits), or abandon the step",
			p.Name, ep.ID, st.Name, be.Task.Revision, strings.Join(parts, "; ")),
		allot.BudgetExhausted, temporal.ApplicationErrorOptions{NonRetryable: true, Category: waitCategory,
			Details: []any{ParkDetails{TaskState: allot.PaidPlanned, Budgets: be.Shortfalls}}})
}

// BudgetRoomInput asks whether a parked task's budgets have room now: the
// shortfalls it was refused with, each asking its amount again.
type BudgetRoomInput struct {
	PaidTaskInput
	Needs []ledger.BudgetShortfall `json:"needs"`
}

// BudgetRoomResult says whether every budget has room, and what those that
// do not have now.
type BudgetRoomResult struct {
	Room       bool                     `json:"room"`
	Shortfalls []ledger.BudgetShortfall `json:"shortfalls,omitempty"`
}

// BudgetRoom reads, without writing, whether the budgets a parked task was
// refused by have room for it now (a raise, a release, a cost below its
// reservation): the Episode then tries the step again, and the admission
// decides. A budget the pipeline file no longer has, that no longer covers
// the step, or that now counts another currency is not asked: it cannot
// admit the task any more, nor refuse it, so waiting on it would last for
// ever; the step runs again and the budgets that cover it now decide
// (invariant 20 of docs/design.md).
func (a *Activities) BudgetRoom(ctx context.Context, in BudgetRoomInput) (BudgetRoomResult, error) {
	p, _, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return BudgetRoomResult{}, err
	}
	_, covering := a.covering(p, st)
	var rs []allot.Reservation
	for _, n := range in.Needs {
		limit, covers := coveringLimit(covering, n)
		if !covers {
			activity.GetLogger(ctx).Info("the budget a parked task waited on no longer covers it: the step runs again under the budgets that do",
				"budget", n.Budget, "period", n.Period, "step", st.Name)
			continue
		}
		rs = append(rs, allot.Reservation{Budget: n.Budget, Period: n.Period, Currency: n.Currency, Limit: limit, Amount: n.Asked})
	}
	if len(rs) == 0 {
		return BudgetRoomResult{Room: true}, nil
	}
	short, err := a.Ledger.BudgetRoom(ctx, in.ref(), rs)
	if err != nil {
		return BudgetRoomResult{}, classify(err)
	}
	return BudgetRoomResult{Room: len(short) == 0, Shortfalls: short}, nil
}

// coveringLimit is the file's limit of the budget that refused n, if that
// budget still covers the step in n's currency; else n's own limit and
// false.
func coveringLimit(covering []pipeline.Budget, n ledger.BudgetShortfall) (int64, bool) {
	for _, b := range covering {
		if b.Name == n.Budget && b.Limit.Currency == n.Currency {
			return b.Limit.Amount, true
		}
	}
	return n.Limit, false
}

// budgetAlerts records the soft thresholds the step's budgets crossed with
// a cost just recorded, and logs and counts each once. A failure only
// delays the alert to the next cost of the period: the cost is recorded.
func (a *Activities) budgetAlerts(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step) {
	_, budgets := a.covering(p, st)
	var checks []ledger.BudgetAlertCheck
	for _, b := range budgets {
		if len(b.Alerts) > 0 {
			checks = append(checks, ledger.BudgetAlertCheck{BudgetLimit: ledger.BudgetLimit{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount},
				Period: b.PeriodOf(ep.NominalTime), Thresholds: b.AlertBasisPoints()})
		}
	}
	if len(checks) == 0 {
		return
	}
	alerts, err := a.Ledger.RecordBudgetAlerts(ctx, checks)
	if err != nil {
		activity.GetLogger(ctx).Warn("recording budget alerts failed; the next cost of the period records them", "error", err)
		return
	}
	for _, al := range alerts {
		activity.GetLogger(ctx).Warn("budget threshold crossed", "budget", al.Budget, "period", al.Period,
			"threshold", fmt.Sprintf("%d%%", al.Threshold/100), "settled", allot.Money{Amount: al.Settled, Currency: al.Currency}.String(),
			"limit", allot.Money{Amount: al.Limit, Currency: al.Currency}.String())
		count(ctx, MetricBudgetAlerts, 1, map[string]string{"budget": al.Budget, "period": al.Period, "threshold": fmt.Sprintf("%g", float64(al.Threshold)/10000)})
	}
}
