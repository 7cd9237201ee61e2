package activities

import (
	"context"
	"time"

	"allot"
	"allot/pipeline"
)

// DecideCatchUpInput asks whether a scheduled run that begins at BeganAt
// still runs its NominalTime under the pipeline's catch-up policy.
type DecideCatchUpInput struct {
	Pipeline    string    `json:"pipeline"`
	NominalTime time.Time `json:"nominal_time"`
	BeganAt     time.Time `json:"began_at"`
	// StartedAt is when the Schedule started the run's workflow: later
	// than its catchup_window after the nominal time, only a backfill
	// through the Schedule (--via-schedule) starts it, and an operator
	// asked for it.
	StartedAt time.Time `json:"started_at,omitzero"`
}

// DecideCatchUpResult is the policy's answer, with what it was.
type DecideCatchUpResult struct {
	pipeline.CatchUpDecision
	Policy string `json:"policy"`
	// Backfill: the Schedule started the run as a backfill (StartedAt),
	// which always runs.
	Backfill bool `json:"backfill,omitempty"`
}

// DecideCatchUp applies the pipeline's catch_up policy to one scheduled
// run (docs/design.md, "Catch-up"). It reads only the worker's pipelines,
// so the ScheduledRun runs it as a local activity. A pipeline without a
// schedule runs everything it is asked to.
func (a *Activities) DecideCatchUp(ctx context.Context, in DecideCatchUpInput) (DecideCatchUpResult, error) {
	p, err := a.pipeline(in.Pipeline)
	if err != nil {
		return DecideCatchUpResult{}, err
	}
	if p.Schedule == nil {
		return DecideCatchUpResult{CatchUpDecision: pipeline.CatchUpDecision{Run: true}, Policy: allot.CatchUpAll}, nil
	}
	spec, err := p.Schedule.Spec()
	if err != nil {
		return DecideCatchUpResult{}, nonRetryable(allot.InvalidInput, "pipeline %s: %v", p.Name, err)
	}
	if !in.StartedAt.IsZero() && in.StartedAt.Sub(in.NominalTime) > spec.CatchupWindow+spec.Jitter {
		return DecideCatchUpResult{CatchUpDecision: pipeline.CatchUpDecision{Run: true}, Policy: spec.CatchUp.String(), Backfill: true}, nil
	}
	d, err := spec.DecideCatchUp(p.TimeZone, in.NominalTime, in.BeganAt)
	if err != nil {
		return DecideCatchUpResult{}, nonRetryable(allot.InvalidInput, "pipeline %s: %v", p.Name, err)
	}
	return DecideCatchUpResult{CatchUpDecision: d, Policy: spec.CatchUp.String()}, nil
}
