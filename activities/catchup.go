package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"

	"allot"
	"allot/internal/ledger"
	"allot/internal/livespec"
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
	// Key and RunID name the asking run. A run whose workflow task was
	// lost after it allocated (its worker killed mid-task) asks again in
	// a later attempt, which begins later: the ledger says it allocated,
	// and the answer stays the first one, run.
	Key   string `json:"key,omitempty"`
	RunID string `json:"run_id,omitempty"`
}

// DecideCatchUpResult is the policy's answer, with what it was.
type DecideCatchUpResult struct {
	pipeline.CatchUpDecision
	Policy string `json:"policy"`
	// Backfill: the Schedule started the run as a backfill (StartedAt),
	// which always runs.
	Backfill bool `json:"backfill,omitempty"`
	// AllocatedAlready: the policy would skip the time, but this run
	// allocated its key in an earlier attempt of its workflow task, so
	// it runs the episode it holds.
	AllocatedAlready bool `json:"allocated_already,omitempty"`
	// SpecFrom says whose timing the policy counted later times by: the
	// live Schedule's (livespec.FromSchedule), or the pipeline file's
	// when there is no Schedule or no client to ask.
	SpecFrom string `json:"spec_from,omitempty"`
}

// DecideCatchUp applies the pipeline's catch_up policy to one scheduled
// run (docs/design.md, "Catch-up"). It reads the worker's pipelines and
// the live Schedule's timing (one describe), so the ScheduledRun runs it
// as a local activity. A pipeline without a schedule runs everything it
// is asked to.
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
	zone, from := p.TimeZone, livespec.FromPipelineFile
	if a.Temporal != nil {
		desc, err := a.Temporal.ScheduleClient().GetHandle(ctx, allot.ScheduleID(p.Name)).Describe(ctx)
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
			if spec, zone, err = livespec.Of(spec, desc.Schedule); err != nil {
				return DecideCatchUpResult{}, nonRetryable(allot.InvalidInput, "schedule %s: %v: allot cannot count its later times; make it the pipeline's again with `starter schedule update --pipeline %s`", allot.ScheduleID(p.Name), err, p.Name)
			}
			from = livespec.FromSchedule
		case !errors.As(err, &notFound):
			return DecideCatchUpResult{}, fmt.Errorf("describe schedule %s: %w", allot.ScheduleID(p.Name), err)
		}
		// No Schedule (deleted since it started the run): the file's.
	}
	if !in.StartedAt.IsZero() && in.StartedAt.Sub(in.NominalTime) > spec.CatchupWindow+spec.Jitter {
		return DecideCatchUpResult{CatchUpDecision: pipeline.CatchUpDecision{Run: true}, Policy: spec.CatchUp.String(), Backfill: true, SpecFrom: from}, nil
	}
	d, err := spec.DecideCatchUp(zone, in.NominalTime, in.BeganAt)
	if err != nil {
		return DecideCatchUpResult{}, nonRetryable(allot.InvalidInput, "pipeline %s: %v", p.Name, err)
	}
	out := DecideCatchUpResult{CatchUpDecision: d, Policy: spec.CatchUp.String(), SpecFrom: from}
	if !d.Run {
		if out.AllocatedAlready, err = a.allocatedBy(ctx, p.Name, in.Key, in.RunID); err != nil {
			return DecideCatchUpResult{}, err
		}
		out.Run = out.AllocatedAlready
	}
	return out, nil
}

// allocatedBy reports whether runID allocated the episode key is bound to.
// The ScheduledRun decides and allocates in one workflow task: if that task
// is lost after the allocation committed, its next attempt begins later and
// could skip a time whose episode it already holds, leaving the episode
// bound to the key with no run to start it (docs/design.md, "Catch-up").
func (a *Activities) allocatedBy(ctx context.Context, pipelineName, key, runID string) (bool, error) {
	if a.Ledger == nil || key == "" || runID == "" {
		return false, nil
	}
	ep, err := a.Ledger.EpisodeByKey(ctx, pipelineName, key)
	switch {
	case errors.Is(err, ledger.ErrEpisodeNotFound):
		return false, nil
	case err != nil:
		return false, classify(err)
	}
	return ep.AllocatedByRun == runID, nil
}
