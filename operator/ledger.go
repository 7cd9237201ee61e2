package operator

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"allot/ledger"
	"allot/pipeline"
)

var periodPattern = regexp.MustCompile(`^\d{4}-(W\d{2}|\d{2}-\d{2})$`)

// EpisodesInput selects episodes of one pipeline, optionally one period.
type EpisodesInput struct {
	Pipeline string
	Period   string
}

// EpisodesResult lists episodes in period and sequence order.
type EpisodesResult struct {
	Pipeline string           `json:"pipeline"`
	Period   string           `json:"period,omitempty"`
	Episodes []ledger.Episode `json:"episodes"`
}

// Episodes lists episodes from the ledger.
func Episodes(ctx context.Context, led *ledger.Ledger, in EpisodesInput) (EpisodesResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return EpisodesResult{}, err
	}
	if in.Period != "" && !periodPattern.MatchString(in.Period) {
		return EpisodesResult{}, fmt.Errorf("period %q is not a period: use an ISO week like 2026-W32 or a day like 2026-08-07", in.Period)
	}
	eps, err := led.ListEpisodes(ctx, in.Pipeline, in.Period)
	if err != nil {
		return EpisodesResult{}, err
	}
	if eps == nil {
		eps = []ledger.Episode{}
	}
	return EpisodesResult{Pipeline: in.Pipeline, Period: in.Period, Episodes: eps}, nil
}

// CheckResult lists invariant violations; OK means there are none.
type CheckResult struct {
	Pipeline   string             `json:"pipeline,omitempty"`
	OK         bool               `json:"ok"`
	Violations []ledger.Violation `json:"violations"`
}

// Check verifies invariants 1-4, 7 and 8 of docs/design.md over the ledger.
func Check(ctx context.Context, led *ledger.Ledger, pipelineName string) (CheckResult, error) {
	if pipelineName != "" {
		if err := pipeline.ValidateName(pipelineName); err != nil {
			return CheckResult{}, err
		}
	}
	vs, err := led.Check(ctx, pipelineName)
	if err != nil {
		return CheckResult{}, err
	}
	if vs == nil {
		vs = []ledger.Violation{}
	}
	return CheckResult{Pipeline: pipelineName, OK: len(vs) == 0, Violations: vs}, nil
}

// StatsInput selects the runs and episodes to count.
type StatsInput struct {
	Pipeline string
	Since    time.Time // zero: all
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
}

// Stats counts outcomes from the ledger: every run says why (invariant 10).
func Stats(ctx context.Context, led *ledger.Ledger, in StatsInput) (StatsResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
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
	return out, nil
}

func nonNil(c []ledger.OutcomeCount) []ledger.OutcomeCount {
	if c == nil {
		return []ledger.OutcomeCount{}
	}
	return c
}
