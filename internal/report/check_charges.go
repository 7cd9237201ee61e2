package report

// What check finds from the charges themselves (invariant 20 of
// docs/design.md, "Budgets"): a budget's own entries can miss money that
// was spent (a task sent without a reservation, a budget added or edited
// after the spend), so its figures would show spent money as free. These
// checks read every recorded charge of a covered step, whatever its budget
// entries say.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// KindChargeUnreserved means a paid task of a step a budget covers reached
// the vendor (it has a reference) without a reservation in that budget.
const KindChargeUnreserved = "charge_unreserved"

// chargeKey is one budget's period.
type chargeKey struct{ budget, period string }

// taskCoverage finds, for check, the budgets of the pipeline file that
// cover a paid task (by its episode's pinned plan) and its episode's
// nominal time, reading each episode once.
type taskCoverage struct {
	led      *ledger.Ledger
	set      *pipeline.Set
	episodes map[[2]string]*coveredEpisode
}

type coveredEpisode struct {
	ep ledger.Episode
	p  *pipeline.Pipeline // nil: no pipeline of the file, or a plan it cannot read
}

func newTaskCoverage(led *ledger.Ledger, set *pipeline.Set) *taskCoverage {
	return &taskCoverage{led: led, set: set, episodes: map[[2]string]*coveredEpisode{}}
}

// of returns the budgets covering t and its episode; none when its
// pipeline or step is not in the file (the audit reports a plan it cannot
// read).
func (c *taskCoverage) of(ctx context.Context, t ledger.PaidTask) ([]pipeline.Budget, ledger.Episode, error) {
	k := [2]string{t.Pipeline, t.EpisodeID}
	e, ok := c.episodes[k]
	if !ok {
		e = &coveredEpisode{}
		c.episodes[k] = e
		if _, err := c.set.Get(t.Pipeline); err != nil {
			return nil, ledger.Episode{}, nil
		}
		var err error
		if e.ep, err = c.led.Episode(ctx, t.Pipeline, t.EpisodeID); err != nil {
			return nil, ledger.Episode{}, err
		}
		plan, err := c.led.EpisodePlan(ctx, t.Pipeline, t.EpisodeID)
		if err != nil {
			return nil, ledger.Episode{}, err
		}
		e.p = pinnedPipeline(c.set, t.Pipeline, plan)
	}
	st, ok := pinnedStep(c.set, e.p, t.Step)
	if !ok {
		return nil, e.ep, nil
	}
	return c.set.BudgetsFor(t.Pipeline, st), e.ep, nil
}

// pinnedPipeline is the pipeline name of set as an episode's pinned plan
// ("" none) has it; nil for a pipeline the file no longer has, or a plan it
// cannot read (the audit reports that).
func pinnedPipeline(set *pipeline.Set, name, plan string) *pipeline.Pipeline {
	p, err := set.Get(name)
	if err != nil {
		return nil
	}
	if plan != "" {
		if p, err = p.WithPlan(plan); err != nil {
			return nil
		}
	}
	return p
}

// pinnedStep is step of p (nil: none), with the max_cost the file gives a
// step pinned before max_cost existed, as budgets judge coverage with it.
func pinnedStep(set *pipeline.Set, p *pipeline.Pipeline, step string) (pipeline.Step, bool) {
	if p == nil {
		return pipeline.Step{}, false
	}
	st, ok := p.Step(step)
	if ok && st.MaxCost == nil {
		st.MaxCost = set.MaxCostOf(p.Name, st)
	}
	return st, ok
}

// chargesAgainstBudgets reports each sent task of a covered step (not an
// imported one: it was charged before allot ran it) that holds no entry in
// a budget covering it, and each (budget, period) whose recorded charges
// exceed its limit while its entries say they do not. It reads a.Tasks and
// a.Costs (the audit ran WithRefs), and billed: what the vendors' bills
// charged each task (check --vendor), which counts where it is more than
// the ledger's cost or the ledger lost the answer.
func chargesAgainstBudgets(ctx context.Context, led *ledger.Ledger, in CheckInput, a ledger.Audit, billed map[ledger.PaidTaskRef]allot.Money) ([]ledger.Violation, error) {
	if in.Pipelines == nil || len(in.Pipelines.Budgets()) == 0 {
		return nil, nil
	}
	costs := map[string]ledger.CostEntry{}
	for _, c := range a.Costs {
		costs[c.RemoteRef] = c.CostEntry
	}
	imported := map[[2]string]bool{}
	// A charge a person acknowledged in a budget, with a reason, is known
	// spend outside its records, no longer a finding.
	acks, err := led.ChargeAcks(ctx, "")
	if err != nil {
		return nil, err
	}
	type ackKey struct {
		budget string
		ref    ledger.PaidTaskRef
	}
	acked := map[ackKey]bool{}
	for _, a := range acks {
		acked[ackKey{a.Budget, a.PaidTaskRef}] = true
	}
	pipelinesSeen := map[string]bool{}
	coverage := newTaskCoverage(led, in.Pipelines)
	charged := map[chargeKey]int64{}
	budgets := map[string]pipeline.Budget{}
	var out []ledger.Violation
	for _, t := range a.Tasks {
		billedCost, hasBill := billed[t.PaidTaskRef]
		if t.RemoteRef == "" && !hasBill || in.Pipeline != "" && t.Pipeline != in.Pipeline {
			continue
		}
		if !pipelinesSeen[t.Pipeline] {
			pipelinesSeen[t.Pipeline] = true
			metas, err := led.Imports(ctx, t.Pipeline)
			if err != nil {
				return nil, err
			}
			for _, m := range metas {
				imported[[2]string{t.Pipeline, m.EpisodeID}] = true
			}
		}
		covering, ep, err := coverage.of(ctx, t)
		if err != nil {
			return nil, err
		}
		if len(covering) == 0 {
			continue
		}
		k := [2]string{t.Pipeline, t.EpisodeID}
		entries, err := led.TaskBudgetEntries(ctx, t.PaidTaskRef)
		if err != nil {
			return nil, err
		}
		cost, hasCost := costs[t.RemoteRef]
		// The vendor's bill, where it says more than the ledger (or the
		// ledger lost the answer), is what was spent.
		if hasBill && (!hasCost || billedCost.Currency == cost.Currency && billedCost.Amount > cost.Amount) {
			cost, hasCost = ledger.CostEntry{RemoteRef: t.RemoteRef, Amount: billedCost.Amount, Currency: billedCost.Currency}, true
		}
		for _, b := range covering {
			budgets[b.Name] = b
			period := b.PeriodOf(ep.NominalTime)
			// An acknowledged charge is known spend outside the budget: a
			// person said why, so it no longer counts against its limit.
			ackedHere := acked[ackKey{b.Name, t.PaidTaskRef}]
			if hasCost && cost.Currency == b.Limit.Currency && !ackedHere {
				sum, err := addCharge(charged[chargeKey{b.Name, period}], cost.Amount)
				if err != nil {
					return nil, fmt.Errorf("budget %s period %s: %w", b.Name, period, err)
				}
				charged[chargeKey{b.Name, period}] = sum
			}
			if imported[k] || ackedHere || slices.ContainsFunc(entries, func(e ledger.BudgetEntry) bool {
				return e.Budget == b.Name && e.Period == period && e.State != ledger.EntryReleased
			}) {
				continue
			}
			what := "no cost recorded"
			if hasCost {
				what = "cost " + allot.Money{Amount: cost.Amount, Currency: cost.Currency}.String()
			}
			out = append(out, ledger.Violation{Kind: KindChargeUnreserved, Pipeline: t.Pipeline, Episode: t.EpisodeID,
				Detail: fmt.Sprintf("paid task %s/%s step %q revision %d reached the vendor (reference %q, %s) without a reservation in budget %s period %s, which covers it: its budget figures leave this spend out (it was sent before the budget covered the step, or without an admission)",
					t.Pipeline, t.EpisodeID, t.Step, t.Revision, t.RemoteRef, what, b.Name, period),
				Fix: "the charge stands (the vendor was paid once) and is counted in the period's charges, which this check compares with the limit; look at " + allot.BudgetShowCommand(b.Name, period) +
					", then, knowing why, acknowledge the period's charges outside its records: " + allot.BudgetAcknowledgeCommand(b.Name, period, "spent before the budget covered the step")})
		}
	}
	keys := make([]chargeKey, 0, len(charged))
	for k := range charged {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].budget < keys[j].budget || keys[i].budget == keys[j].budget && keys[i].period < keys[j].period
	})
	for _, k := range keys {
		b := budgets[k.budget]
		bp, err := led.BudgetPeriodOf(ctx, ledger.LimitOf(b), k.period)
		if err != nil {
			return nil, err
		}
		// The entries' own excess is the ledger audit's budget_exceeded;
		// this one is the excess the entries hide.
		if charged[k] <= bp.Limit || bp.Settled > bp.Limit {
			continue
		}
		m := func(x int64) string { return allot.Money{Amount: x, Currency: b.Limit.Currency}.String() }
		out = append(out, ledger.Violation{Kind: ledger.KindBudgetExceeded,
			Detail: fmt.Sprintf("budget %s period %s: the tasks it covers were charged %s, over its limit of %s by %s, while its entries count %s settled (the difference was spent without a reservation in it)",
				k.budget, k.period, m(charged[k]), m(bp.Limit), m(charged[k]-bp.Limit), m(bp.Settled))})
	}
	return out, nil
}

// addCharge adds a charge to a period's sum, refusing to wrap.
func addCharge(sum, amount int64) (int64, error) {
	if amount < 0 || sum > math.MaxInt64-amount {
		return 0, fmt.Errorf("charges add up beyond what int64 minor units hold")
	}
	return sum + amount, nil
}
