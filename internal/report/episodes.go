package report

import (
	"context"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// checkPipelinePeriod refuses a --period that is not one of the
// pipeline's periods, with the same error and fix as a budget's
// (pipeline.CheckPeriodOf); "" is every period. A pipeline gone from the
// file (its episodes stay in the ledger) takes a day or an ISO week.
func checkPipelinePeriod(set *pipeline.Set, name, period string) error {
	if period == "" {
		return nil
	}
	var err error
	var p *pipeline.Pipeline
	if set != nil {
		p, _ = set.Get(name)
	}
	if p != nil {
		err = p.CheckPeriod(period)
	} else if kind, ok := pipeline.BudgetPeriodKindOf(period); !ok || kind == pipeline.Month {
		err = pipeline.CheckPeriodOf(pipeline.ISOWeek, "pipeline "+name, period)
	}
	if err != nil {
		return &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	return nil
}

// EpisodesInput selects episodes of one pipeline, optionally one period.
type EpisodesInput struct {
	Pipeline string
	Period   string
	// Pipelines, when set, refuses a pipeline neither it nor the ledger
	// knows (see KnownPipeline).
	Pipelines *pipeline.Set
}

// EpisodesResult lists episodes in period and sequence order.
type EpisodesResult struct {
	Pipeline string        `json:"pipeline"`
	Period   string        `json:"period,omitempty"`
	Episodes []EpisodeView `json:"episodes"`
}

// Episodes lists episodes from the ledger.
func Episodes(ctx context.Context, led *ledger.Ledger, in EpisodesInput) (EpisodesResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return EpisodesResult{}, err
	}
	if err := checkPipelinePeriod(in.Pipelines, in.Pipeline, in.Period); err != nil {
		return EpisodesResult{}, err
	}
	if err := KnownPipeline(ctx, led, in.Pipelines, in.Pipeline); err != nil {
		return EpisodesResult{}, err
	}
	eps, err := led.ListEpisodes(ctx, in.Pipeline, in.Period)
	if err != nil {
		return EpisodesResult{}, err
	}
	return EpisodesResult{Pipeline: in.Pipeline, Period: in.Period, Episodes: episodeViews(eps)}, nil
}

// StatsInput selects the runs and episodes to count.
type StatsInput struct {
	Pipeline string
	Since    time.Time // zero: all
	// Pipelines gives each pipeline's stall_after and, when set, refuses a
	// pipeline neither it nor the ledger knows (see KnownPipeline).
	Pipelines *pipeline.Set
	Now       time.Time // zero: time.Now(), for stalled episodes
}

// StatsResult counts runs by outcome and reason, and episodes by their
// current outcome and reason.
type StatsResult struct {
	Pipeline      string                `json:"pipeline"`
	Since         time.Time             `json:"since,omitzero"`
	Runs          []ledger.OutcomeCount `json:"runs"`
	Episodes      []ledger.OutcomeCount `json:"episodes"`
	RunsTotal     int                   `json:"runs_total"`
	EpisodesTotal int                   `json:"episodes_total"`
	// WorthALook are the run outcomes that are not a schedule's normal
	// course (see NormalRun): failures, keys refused, other skips.
	WorthALook []ledger.OutcomeCount `json:"worth_a_look"`
	// Stalled are the episodes retrying a step for longer than the
	// pipeline's stall_after; Episodes counts them as "stalled".
	StallAfter string                   `json:"stall_after"`
	Stalled    []ledger.RetryingEpisode `json:"stalled"`
	// Budgets are the periods of the budgets that cover the pipeline:
	// limit, settled, reserved and free in each.
	Budgets []BudgetPeriodView `json:"budgets"`
	// OnTime counts, per month of their deadline in the pipeline's zone,
	// the periods judged at their deadline (docs/design.md, "Period
	// deadlines"); LateOpen are the periods recorded late that have not
	// completed since: they need a human.
	OnTime   []OnTimeMonth           `json:"on_time"`
	LateOpen []ledger.DeadlineRecord `json:"late_open"`
}

// Stats counts outcomes from the ledger: every run says why (invariant 10).
func Stats(ctx context.Context, led *ledger.Ledger, in StatsInput) (StatsResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return StatsResult{}, err
	}
	if err := KnownPipeline(ctx, led, in.Pipelines, in.Pipeline); err != nil {
		return StatsResult{}, err
	}
	runs, err := led.RunOutcomeCounts(ctx, in.Pipeline, in.Since)
	if err != nil {
		return StatsResult{}, err
	}
	eps, err := led.EpisodeOutcomeCounts(ctx, in.Pipeline, in.Since)
	if err != nil {
		return StatsResult{}, err
	}
	out := StatsResult{Pipeline: in.Pipeline, Since: in.Since, Runs: nonNil(runs), Episodes: nonNil(eps)}
	for _, c := range runs {
		out.RunsTotal += c.Count
	}
	for _, c := range eps {
		out.EpisodesTotal += c.Count
	}
	if out.Budgets, err = BudgetsOfPipeline(ctx, led, in.Pipelines, in.Pipeline, nil); err != nil {
		return StatsResult{}, err
	}
	if out.OnTime, out.LateOpen, err = onTimeMonths(ctx, led, in.Pipelines, in.Pipeline, in.Since); err != nil {
		return StatsResult{}, err
	}
	return addHealth(ctx, led, in, out)
}

func nonNil(c []ledger.OutcomeCount) []ledger.OutcomeCount {
	if c == nil {
		return []ledger.OutcomeCount{}
	}
	return c
}
