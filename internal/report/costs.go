package report

import (
	"context"
	"fmt"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// CostsInput selects a pipeline's costs, optionally one period.
type CostsInput struct {
	Pipeline string
	Period   string
	// Pipelines, when set, refuses a pipeline neither it nor the ledger
	// knows (see KnownPipeline).
	Pipelines *pipeline.Set
}

// CostLine is the cost of one step of one episode (all its revisions).
type CostLine struct {
	EpisodeID string `json:"episode_id"`
	Period    string `json:"period"`
	Step      string `json:"step"`
	Revisions int    `json:"revisions"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// CostsResult lists costs per episode and step, with totals per currency.
type CostsResult struct {
	Pipeline string           `json:"pipeline"`
	Period   string           `json:"period,omitempty"`
	Lines    []CostLine       `json:"lines"`
	Totals   map[string]int64 `json:"totals"`
	// Budgets are the periods of the budgets that cover the pipeline (of
	// its episodes in Period, if given): spend against each budget.
	Budgets []BudgetPeriodView `json:"budgets"`
}

// Costs sums the ledger's cost entries per episode and step. Every sum is
// checked: one that would overflow is an error (allot.ErrAmountOverflow),
// never a wrong number.
func Costs(ctx context.Context, led *ledger.Ledger, in CostsInput) (CostsResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return CostsResult{}, err
	}
	if err := checkPipelinePeriod(in.Pipelines, in.Pipeline, in.Period); err != nil {
		return CostsResult{}, err
	}
	if err := KnownPipeline(ctx, led, in.Pipelines, in.Pipeline); err != nil {
		return CostsResult{}, err
	}
	entries, err := led.Costs(ctx, in.Pipeline, in.Period)
	if err != nil {
		return CostsResult{}, err
	}
	out := CostsResult{Pipeline: in.Pipeline, Period: in.Period, Lines: []CostLine{}, Totals: map[string]int64{}}
	index := map[[3]string]int{}
	for _, e := range entries {
		k := [3]string{e.EpisodeID, e.Step, e.Currency}
		i, ok := index[k]
		if !ok {
			i = len(out.Lines)
			index[k] = i
			out.Lines = append(out.Lines, CostLine{EpisodeID: e.EpisodeID, Period: e.Period, Step: e.Step, Currency: e.Currency})
		}
		out.Lines[i].Revisions++
		m := allot.Money{Amount: e.Amount, Currency: e.Currency}
		sum, err := allot.AddAmount(out.Lines[i].Amount, e.Amount)
		if err == nil {
			err = allot.AddTo(out.Totals, m)
		}
		if err != nil {
			return CostsResult{}, fmt.Errorf("costs of %s: %w: a cost entry is absurd; run starter check --pipeline %s", in.Pipeline, err, in.Pipeline)
		}
		out.Lines[i].Amount = sum
	}
	out.Budgets, err = costsBudgets(ctx, led, in)
	return out, err
}
