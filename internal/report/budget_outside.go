package report

import (
	"context"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// OutsideSpend is what one budget period's records leave out
// (docs/design.md, "Budgets"): the costs of paid tasks the budget covers
// that hold no entry in it, sent before the budget covered their step,
// imported, or sent without an admission. The budget's figures are its
// entries; these are charged all the same.
type OutsideSpend struct {
	Charges []ledger.ChargeOutside `json:"charges"`
	// Amount sums the charges in the budget's currency; Imported,
	// Acknowledged and Open split it: charged before allot ran the
	// episode, acknowledged by a person with a reason, and neither, which
	// check flags (charge_unreserved) until someone acknowledges them.
	Amount       int64 `json:"amount"`
	Imported     int64 `json:"imported"`
	Acknowledged int64 `json:"acknowledged"`
	Open         int64 `json:"open"`
	// OpenCount counts the charges neither imported nor acknowledged, in
	// any currency: what check flags.
	OpenCount int `json:"open_count"`
	// OtherCurrency counts charges in another currency than the
	// budget's, which no sum above holds.
	OtherCurrency int `json:"other_currency,omitempty"`
}

// OutsideRecords is the spend budget b's period leaves out of its records:
// each cost of a task it covers (by the episode's pinned plan, as check
// judges) whose episode falls in the period and that holds no entry in it.
func OutsideRecords(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, b pipeline.Budget, period string) (OutsideSpend, error) {
	from, to, err := b.PeriodBounds(period)
	if err != nil {
		return OutsideSpend{}, allot.Errorf(allot.InvalidInput, "budget %s: %v", b.Name, err)
	}
	var pipelines []string
	if b.Pipeline != "" {
		pipelines = []string{b.Pipeline}
	}
	charges, err := led.ChargesOutsideBudget(ctx, b.Name, period, pipelines, from, to)
	if err != nil {
		return OutsideSpend{}, err
	}
	out := OutsideSpend{Charges: []ledger.ChargeOutside{}}
	plans := map[[2]string]*pipeline.Pipeline{}
	for _, c := range charges {
		k := [2]string{c.Pipeline, c.Plan}
		p, seen := plans[k]
		if !seen {
			p = pinnedPipeline(set, c.Pipeline, c.Plan)
			plans[k] = p
		}
		if st, ok := pinnedStep(set, p, c.Step); !ok || !b.Covers(c.Pipeline, st) {
			continue
		}
		out.Charges = append(out.Charges, c)
		if !c.Imported && c.Ack == nil {
			out.OpenCount++
		}
		if c.Currency != b.Limit.Currency {
			out.OtherCurrency++
			continue
		}
		if out.Amount, err = allot.AddAmount(out.Amount, c.Amount); err != nil {
			return OutsideSpend{}, err
		}
		switch {
		case c.Imported:
			out.Imported += c.Amount
		case c.Ack != nil:
			out.Acknowledged += c.Amount
		default:
			out.Open += c.Amount
		}
	}
	return out, nil
}
