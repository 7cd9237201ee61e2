// Package catchup settles the times a pipeline's Schedule matched while
// nothing ran them: the Schedule was paused, or the Temporal server was
// down longer than the schedule's catchup_window, so Temporal never started
// a run. The pipeline's catch_up policy decides which of them still run;
// the others are recorded in the ledger as skipped runs, reason
// missed_catch_up, under their keys (docs/design.md, "Catch-up"). Times
// whose run Temporal did start decide for themselves when they begin
// (workflows.ScheduledRun), with the same rule.
package catchup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/ledger"
	"allot/internal/livespec"
	"allot/pipeline"
	"allot/workflows"
)

// SweepRunID is the run ID of the skipped runs a sweep records: no
// workflow ran them. One per key, so a repeated sweep replaces its record.
const SweepRunID = "catch-up"

// ErrTimeNotYet means a sweep was asked to settle times that have not come
// yet.
var ErrTimeNotYet = errors.New("time has not come yet")

// Sweeper settles missed times. It needs a writable ledger.
type Sweeper struct {
	Client    client.Client
	Pipelines *pipeline.Set
	Ledger    *ledger.Ledger
	TaskQueue string
	LedgerID  string
	// StartRun starts the ScheduledRun of one missed time the policy runs;
	// nil starts it as StartRun does.
	StartRun func(ctx context.Context, p *pipeline.Pipeline, nominal time.Time) error
	// Logger is where Run says what it did; nil: slog.Default().
	Logger *slog.Logger

	mu    sync.Mutex
	swept map[string]time.Time // SweepAll: each pipeline's last Until
}

// SweepInput asks to settle one pipeline's missed times up to Until.
type SweepInput struct {
	Pipeline string
	// Until is the last time that may be settled: later times the
	// Schedule may still start (inside its catchup_window, or after an
	// unpause). It may not be after Now.
	Until time.Time
	// Settled, instead of Until, settles the times the Schedule will not
	// start any more at Now: SettledUntil of its live spec.
	Settled bool
	// Now is when the policy is applied (the missed runs that run start
	// now); zero is the wall clock.
	Now time.Time
	// After, when set, is the last time already settled (a sweep before
	// this one reached it): only later times are looked at.
	After time.Time
	// DryRun decides and reports, and writes and starts nothing.
	DryRun bool
}

// SweepResult says what a sweep found and did.
type SweepResult struct {
	Pipeline string    `json:"pipeline"`
	Policy   string    `json:"policy,omitempty"`
	From     time.Time `json:"from,omitzero"` // the times in (From, Until] were looked at
	Until    time.Time `json:"until,omitzero"`
	// NoSchedule: the pipeline has no schedule (configured or on the
	// server); Paused: its schedule is paused, and its missed times are
	// settled when it is unpaused.
	NoSchedule bool `json:"no_schedule,omitempty"`
	Paused     bool `json:"paused,omitempty"`
	// SpecFrom says whose spec listed the times: the live Schedule's
	// (livespec.FromSchedule), which a sweep always reads; Spec is it.
	SpecFrom string                 `json:"spec_from,omitempty"`
	Spec     *pipeline.ScheduleSpec `json:"spec,omitempty"`
	Zone     string                 `json:"zone,omitempty"`
	// Missed are the times nothing ran (no run in the ledger, no
	// workflow); of them, Started run now and Skipped were recorded.
	Missed  []time.Time `json:"missed"`
	Started []time.Time `json:"started"`
	Skipped []time.Time `json:"skipped"`
	DryRun  bool        `json:"dry_run,omitempty"`
	// Error is why SweepAll could not settle the pipeline's times.
	Error string `json:"error,omitempty"`
}

// Sweep settles one pipeline's missed times in (From, Until], From being
// the later of the schedule's creation and Until less its max_backfill.
func (s *Sweeper) Sweep(ctx context.Context, in SweepInput) (SweepResult, error) {
	out := SweepResult{Pipeline: in.Pipeline, Until: in.Until.UTC(), DryRun: in.DryRun}
	p, err := s.Pipelines.Get(in.Pipeline)
	if err != nil {
		return out, err
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	// A time still to come is not missed: the Schedule starts it when it
	// comes (docs/design.md, "Catch-up").
	if !in.Settled && in.Until.After(now) {
		return out, allot.Wrapf(ErrTimeNotYet, allot.InvalidInput, "catch-up of %s refused, nothing was settled: until %s is after now (%s), and a time that has not come yet is not missed; settle up to now at the latest: `%s`",
			p.Name, in.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), allot.CatchUpCommand(p.Name, now.Truncate(time.Second)))
	}
	// The file gives the catch-up settings (livespec.FileSpec).
	fileSpec, err := livespec.FileSpec(p)
	if err != nil {
		return out, err
	}
	out.Policy = fileSpec.CatchUp.String()
	desc, err := s.Client.ScheduleClient().GetHandle(ctx, allot.ScheduleID(p.Name)).Describe(ctx)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		// No Schedule, so no time Temporal skipped: nothing to settle.
		out.NoSchedule = true
		return out, nil
	case err != nil:
		return out, fmt.Errorf("describe schedule %s: %w", allot.ScheduleID(p.Name), err)
	}
	if desc.Schedule.State != nil && desc.Schedule.State.Paused {
		out.Paused = true
		return out, nil
	}
	// The times are the live Schedule's, not the file's: `schedule
	// update` or another tool may have changed them (docs/design.md,
	// "Catch-up").
	spec, zone, err := livespec.Of(fileSpec, desc.Schedule)
	if err != nil {
		return out, fmt.Errorf("schedule %s: %w: allot cannot list the times it missed; make it the pipeline's again with `starter schedule update --pipeline %s`", allot.ScheduleID(p.Name), err, p.Name)
	}
	out.SpecFrom, out.Spec, out.Zone = livespec.FromSchedule, &spec, zone
	if in.Settled {
		out.Until = SettledUntil(spec, now).UTC()
	}
	out.From = desc.Info.CreatedAt.UTC()
	if floor := out.Until.Add(-spec.MaxBackfill); floor.After(out.From) {
		out.From = floor
	}
	if in.After.After(out.From) {
		out.From = in.After.UTC()
	}
	if !out.Until.After(out.From) {
		return out, nil
	}
	times, err := spec.Times(zone, out.From, out.Until, 0)
	if err != nil {
		return out, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if out.Missed, err = s.missed(ctx, p.Name, times); err != nil {
		return out, err
	}
	for _, t := range out.Missed {
		d, err := spec.DecideCatchUp(zone, t, now)
		if err != nil {
			return out, fmt.Errorf("pipeline %s: %w", p.Name, err)
		}
		if d.Run {
			out.Started = append(out.Started, t)
		} else {
			out.Skipped = append(out.Skipped, t)
		}
	}
	if in.DryRun {
		return out, nil
	}
	// Record the skipped times first: a sweep that stops half-way leaves
	// times to settle, never a time both run and recorded as skipped.
	for _, t := range out.Skipped {
		if _, err := s.Ledger.RecordRunOutcome(ctx, ledger.RunOutcome{
			Pipeline: p.Name, AllocationKey: allot.AllocationKey(p.Name, t), RunID: SweepRunID,
			NominalTime: t, NominalTimeSource: allot.NominalFromSchedule,
			Outcome: allot.OutcomeSkipped, Reason: allot.ReasonMissedCatchUp,
			Period: p.PeriodOf(t), Sequence: -1,
		}); err != nil {
			return out, err
		}
	}
	start := s.StartRun
	if start == nil {
		start = s.startRun
	}
	for _, t := range out.Started {
		if err := start(ctx, p, t); err != nil {
			return out, fmt.Errorf("start the missed run of %s at %s: %w", p.Name, t.Format(time.RFC3339), err)
		}
	}
	return out, nil
}

// missed are the times with no run in the ledger, no episode bound to
// their key (an import binds keys), and no workflow of their key: the
// times Temporal never started.
func (s *Sweeper) missed(ctx context.Context, pipelineName string, times []time.Time) ([]time.Time, error) {
	keys := make([]string, len(times))
	for i, t := range times {
		keys[i] = allot.AllocationKey(pipelineName, t)
	}
	runs, err := s.Ledger.RunOutcomesOfKeys(ctx, pipelineName, keys)
	if err != nil {
		return nil, err
	}
	ran := map[string]bool{}
	for _, r := range runs {
		ran[r.AllocationKey] = true
	}
	bound, err := s.Ledger.EpisodesPerKey(ctx, pipelineName, keys)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for i, t := range times {
		if ran[keys[i]] || bound[keys[i]] > 0 {
			continue
		}
		_, err := s.Client.DescribeWorkflowExecution(ctx, keys[i], "")
		var notFound *serviceerror.NotFound
		switch {
		case err == nil:
			continue // its run began or will: it decides for itself
		case !errors.As(err, &notFound):
			return nil, fmt.Errorf("describe workflow %s: %w", keys[i], err)
		}
		out = append(out, t)
	}
	return out, nil
}

// startRun starts the ScheduledRun of a missed time under its key, with
// its nominal time in the input (so the run does not ask the policy
// again), joining a run of the key that already runs.
func (s *Sweeper) startRun(ctx context.Context, p *pipeline.Pipeline, nominal time.Time) error {
	// Priority 0, the server's default: a missed time is a scheduled run,
	// dispatched as the Schedule's own runs are, ahead of backfills.
	rk, _ := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: p.Name, Nominal: nominal}) // no key: it cannot fail
	opts := workflows.ScheduledRunStartOptions(enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		workflows.ScheduledRunStart{Pipeline: p.Name, Run: rk, TaskQueue: s.TaskQueue, Summary: p.Name + " missed run (catch-up)"})
	_, err := s.Client.ExecuteWorkflow(ctx, opts, workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: p.Name, NominalTime: nominal, LedgerID: s.LedgerID})
	return err
}

// SweepAll settles every scheduled pipeline's times that Temporal will not
// start any more: those older than the schedule's catchup_window (and its
// jitter and catch_up_grace). The worker runs it when it starts and then
// every SweepEvery; after a pipeline's first sweep, each looks only at the
// times since the last one reached. A pipeline whose sweep fails has its
// error in its result's Error (and is looked at whole again next time);
// the others go on.
func (s *Sweeper) SweepAll(ctx context.Context, now time.Time) []SweepResult {
	var out []SweepResult
	for _, name := range slices.Sorted(slices.Values(s.Pipelines.Names())) {
		p, err := s.Pipelines.Get(name)
		if err != nil || p.Schedule == nil {
			continue
		}
		s.mu.Lock()
		after := s.swept[name]
		s.mu.Unlock()
		res, err := s.Sweep(ctx, SweepInput{Pipeline: name, Settled: true, Now: now, After: after})
		if err != nil {
			res.Error = err.Error()
		} else if !res.Paused && !res.NoSchedule {
			s.mu.Lock()
			if s.swept == nil {
				s.swept = map[string]time.Time{}
			}
			s.swept[name] = res.Until
			s.mu.Unlock()
		}
		out = append(out, res)
	}
	return out
}

// SettledUntil is the latest time of spec that Temporal will not start any
// more at now: older than its catchup_window, jitter and catch_up_grace.
func SettledUntil(spec pipeline.ScheduleSpec, now time.Time) time.Time {
	return now.Add(-(spec.CatchupWindow + spec.Jitter + spec.CatchUpGrace))
}

// SweepEvery is how often the worker sweeps: a time Temporal dropped (the
// server down past catchup_window) is settled within about this much
// after it became older than the window.
const SweepEvery = time.Minute
