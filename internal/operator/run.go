// Package operator is what the starter CLI does to change things: it drives
// Temporal (runs started the way a Schedule would, schedules, backfills,
// episode updates and resumes, following an episode, a paid task looked up
// at its vendor) and writes the operator's commands to the ledger (budget
// raises, vendor pauses, inputs). Each command returns one result struct
// that the CLI prints as text or JSON; what a command shows of the state it
// changed is report's view.
package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"allot"
	"allot/internal/report"
	"allot/pipeline"
	"allot/workflows"
)

// Runs starts ScheduledRuns on a Temporal cluster.
type Runs struct {
	Client    client.Client
	Pipelines *pipeline.Set
	TaskQueue string
	// Now is the clock for runs without a nominal time; nil means time.Now.
	Now func() time.Time
	// LedgerID is the identity of the ledger the runs must be allocated in
	// (the starter's ledger); "" leaves it to the worker.
	LedgerID string
	// OnNoWorker, when set, is called once when a wait for a run (Wait,
	// FollowEpisode) has gone on for NoWorkerAfter (default
	// DefaultNoWorkerAfter) and no worker polls TaskQueue in Namespace.
	OnNoWorker    func(report.NoWorker)
	NoWorkerAfter time.Duration
	Namespace     string
}

// RunInput is one request to run a pipeline.
type RunInput struct {
	Pipeline string
	// NominalTime is when the run was planned. Zero: now, without Key; with
	// a Key in the Schedule's form, the time the key carries; with any
	// other Key it is required.
	NominalTime time.Time
	// Key is the allocation key; "" is the key a Schedule forms for the
	// nominal time. A key without the pipeline's prefix is put under it.
	Key  string
	Wait bool
}

// RunReusePolicy is the ID-reuse policy of a run an operator asks for
// (workflows.ScheduledRunStartOptions), as `starter run` and the docs'
// `temporal workflow start` command start it: a finished key is never run
// again, a failed one may be (the ledger then hands back the same episode).
const RunReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY

// How a run request was served.
const (
	RunStarted  = "started"  // a new ScheduledRun was started
	RunAttached = "attached" // the key's ScheduledRun was already running
	RunExisting = "existing" // the key's ScheduledRun had finished; nothing started
)

// RunResult says what happened and, once known, what the run decided.
type RunResult struct {
	Action     string                        `json:"action"`
	WorkflowID string                        `json:"workflow_id"`
	RunID      string                        `json:"run_id"`
	Result     *workflows.ScheduledRunResult `json:"result,omitempty"`
}

// Run starts (or finds) the ScheduledRun for the request's key. Validation
// happens before anything is sent, so bad input starts nothing: the key is
// placed under the pipeline's prefix (or refused if it names another
// pipeline), and the nominal time must be known and inside the pipeline's
// window (invariant 12).
func (r *Runs) Run(ctx context.Context, in RunInput) (RunResult, error) {
	p, err := r.Pipelines.Get(in.Pipeline)
	if err != nil {
		return RunResult{}, err
	}
	rk, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: p.Name, Known: r.Pipelines.Names(), Key: in.Key, Nominal: in.NominalTime, Now: r.now()})
	if err != nil {
		return RunResult{}, err
	}
	in.Key = rk.Key
	nominal := rk.Nominal
	if err := p.CheckNominalTime(nominal, r.now()); err != nil {
		return RunResult{}, allot.Errorf(allot.InvalidInput, "%v", err)
	}

	rerun := false
	desc, err := r.Client.DescribeWorkflowExecution(ctx, in.Key, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		desc = nil
	case err != nil:
		return RunResult{}, fmt.Errorf("look up workflow %q: %w", in.Key, err)
	}
	if desc != nil {
		info := desc.GetWorkflowExecutionInfo()
		if err := r.checkSamePeriod(ctx, p, in.Key, info.GetExecution().GetRunId(), nominal); err != nil {
			return RunResult{}, err
		}
		switch info.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return r.follow(ctx, RunAttached, in.Key, info.GetExecution().GetRunId(), in.Wait)
		case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			existing, err := r.follow(ctx, RunExisting, in.Key, info.GetExecution().GetRunId(), true)
			if err != nil || !missedCatchUp(existing.Result) {
				return existing, err
			}
			// The catch-up policy skipped this time (docs/design.md,
			// "Catch-up"): asked for by name, it runs now.
			rerun = true
		}
		// Failed, terminated, canceled or timed out: start it again; the
		// ledger hands back the episode the key already owns.
	}

	// Conflict policy Fail rather than the Schedule's UseExisting: the
	// effect is the same (one run per key), but a start that lost the race
	// to a concurrent one learns that it attached instead of started.
	reuse := RunReusePolicy
	if rerun {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	opts := workflows.ScheduledRunStartOptions(reuse, workflows.ScheduledRunStart{Pipeline: p.Name, Run: rk, TaskQueue: r.TaskQueue})
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	run, err := r.Client.ExecuteWorkflow(ctx, opts,
		workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: p.Name, NominalTime: nominal, LedgerID: r.LedgerID})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		// Another start won since our look-up: attach to it, or report it
		// if it has finished already.
		return r.attach(ctx, in.Key, already.RunId, in.Wait)
	}
	if err != nil {
		return RunResult{}, fmt.Errorf("start ScheduledRun %q: %w", in.Key, err)
	}
	return r.follow(ctx, RunStarted, in.Key, run.GetRunID(), in.Wait)
}

// missedCatchUp: the run was skipped by its pipeline's catch-up policy,
// which leaves the key free.
func missedCatchUp(res *workflows.ScheduledRunResult) bool {
	return res != nil && res.Outcome == allot.OutcomeSkipped && res.Reason == allot.ReasonMissedCatchUp
}

// attach follows a run another start began: attached while it runs,
// existing once it has finished.
func (r *Runs) attach(ctx context.Context, key, runID string, wait bool) (RunResult, error) {
	desc, err := r.Client.DescribeWorkflowExecution(ctx, key, runID)
	if err != nil {
		return RunResult{}, fmt.Errorf("look up workflow %q: %w", key, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return r.follow(ctx, RunAttached, key, runID, wait)
	}
	return r.follow(ctx, RunExisting, key, runID, true)
}

func (r *Runs) follow(ctx context.Context, action, key, runID string, wait bool) (RunResult, error) {
	out := RunResult{Action: action, WorkflowID: key, RunID: runID}
	if !wait {
		return out, nil
	}
	defer r.watchForWorker(ctx)()
	var res workflows.ScheduledRunResult
	if err := r.Client.GetWorkflow(ctx, key, runID).Get(ctx, &res); err != nil {
		return out, fmt.Errorf("ScheduledRun %q failed: %w", key, err)
	}
	out.Result = &res
	return out, nil
}

// checkSamePeriod refuses a request whose nominal time lies in another period
// than the existing run's: the key is bound to that period forever.
func (r *Runs) checkSamePeriod(ctx context.Context, p *pipeline.Pipeline, key, runID string, requested time.Time) error {
	if requested.IsZero() {
		return nil
	}
	existing, err := r.runNominalTime(ctx, key, runID)
	if err != nil || existing.IsZero() {
		return err
	}
	want, have := p.PeriodOf(requested), p.PeriodOf(existing)
	if want == have {
		return nil
	}
	return allot.Errorf(allot.AllocationKeyCrossesPeriod, "allocation key %q belongs to period %s (nominal time %s), but this request's nominal time %s is in period %s: use the key of that period's run, or leave --key out",
		key, have, existing.Format(time.RFC3339), requested.Format(time.RFC3339), want)
}

// runNominalTime reads the nominal time a run was started with: its input's,
// else its Schedule's, else its start time.
func (r *Runs) runNominalTime(ctx context.Context, key, runID string) (time.Time, error) {
	iter := r.Client.GetWorkflowHistory(ctx, key, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return time.Time{}, nil
	}
	ev, err := iter.Next()
	if err != nil {
		return time.Time{}, fmt.Errorf("read the start of workflow %q: %w", key, err)
	}
	return startedNominalTime(ev)
}

func startedNominalTime(ev *historypb.HistoryEvent) (time.Time, error) {
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return time.Time{}, nil
	}
	var in workflows.ScheduledRunInput
	if payloads := attrs.GetInput(); len(payloads.GetPayloads()) > 0 {
		if err := converter.GetDefaultDataConverter().FromPayloads(payloads, &in); err != nil {
			return time.Time{}, fmt.Errorf("decode ScheduledRun input: %w", err)
		}
	}
	if !in.NominalTime.IsZero() {
		return in.NominalTime.UTC(), nil
	}
	if sa := attrs.GetSearchAttributes().GetIndexedFields()[workflows.ScheduledStartTimeAttr.GetName()]; sa != nil {
		var t time.Time
		if err := converter.GetDefaultDataConverter().FromPayload(sa, &t); err == nil && !t.IsZero() {
			return t.UTC(), nil
		}
	}
	return ev.GetEventTime().AsTime().UTC(), nil
}

func (r *Runs) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
