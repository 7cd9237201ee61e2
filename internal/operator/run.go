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
	"allot/internal/ledger"
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
	// ReadLedger, when set, opens the ledger read-only for one read (the
	// starter's ledger.View), so that Preview can say which episode the
	// key already owns and forecast against what is free; an error that
	// wraps ledger.ErrNotCreated means there is no ledger yet. Nil: the
	// forecast takes the budgets' limits.
	ReadLedger func(ctx context.Context, read func(*ledger.Ledger) error) error
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

// RunPreview is what a run request resolves to before anything starts:
// the key placed under its pipeline and the nominal time, resolved once
// (allot.ResolveRunKey) for the forecast and the start alike, the episode
// the key already owns and what a new one would reserve.
type RunPreview struct {
	Pipeline string    `json:"pipeline"`
	Key      string    `json:"key"`
	Nominal  time.Time `json:"nominal_time"`
	// LedgerID is the ledger the run must be allocated in: Runs.LedgerID,
	// else the identity of the ledger ReadLedger read ("" leaves it to the
	// worker).
	LedgerID string `json:"ledger_id,omitempty"`
	// Existing: the key owns an episode already (EpisodeID, "" when the
	// key is ambiguous in an imported ledger), so the run reserves nothing.
	Existing  bool   `json:"existing,omitempty"`
	EpisodeID string `json:"episode_id,omitempty"`
	// Forecast is what the run would reserve in the budgets covering its
	// paid steps, in its nominal time's periods: none when Existing.
	Forecast []BudgetForecast `json:"budgets,omitempty"`
}

// Run starts (or finds) the ScheduledRun for the request's key: Preview,
// then Start.
func (r *Runs) Run(ctx context.Context, in RunInput) (RunResult, error) {
	pv, err := r.Preview(ctx, in)
	if err != nil {
		return RunResult{}, err
	}
	return r.Start(ctx, pv, in.Wait)
}

// Preview resolves a run request without starting anything. Validation
// comes first, so bad input contacts nothing: the key is placed under the
// pipeline's prefix (or refused if it names another pipeline), and the
// nominal time must be known and inside the pipeline's window (invariant
// 12). Then the ledger, if ReadLedger is set, is read once: its identity,
// the key's episode and what is free in the budgets.
func (r *Runs) Preview(ctx context.Context, in RunInput) (RunPreview, error) {
	p, err := r.Pipelines.Get(in.Pipeline)
	if err != nil {
		return RunPreview{}, err
	}
	rk, err := allot.ResolveRunKey(allot.RunKeyInput{Pipeline: p.Name, Known: r.Pipelines.Names(), Key: in.Key, Nominal: in.NominalTime, Now: r.now()})
	if err != nil {
		return RunPreview{}, err
	}
	if err := p.CheckNominalTime(rk.Nominal, r.now()); err != nil {
		return RunPreview{}, allot.Errorf(allot.InvalidInput, "%v", err)
	}
	pv := RunPreview{Pipeline: p.Name, Key: rk.Key, Nominal: rk.Nominal, LedgerID: r.LedgerID}
	read := func(l *ledger.Ledger) error {
		if pv.LedgerID == "" {
			pv.LedgerID = l.ID()
		}
		ep, err := l.EpisodeByKey(ctx, p.Name, rk.Key)
		switch {
		case err == nil:
			pv.Existing, pv.EpisodeID = true, ep.ID
			return nil
		case errors.Is(err, ledger.ErrKeyAmbiguous):
			pv.Existing = true
			return nil
		case !errors.Is(err, ledger.ErrEpisodeNotFound):
			return err
		}
		pv.Forecast, err = ForecastBudgets(ctx, l, r.Pipelines, p.Name, []time.Time{rk.Nominal})
		return err
	}
	if r.ReadLedger != nil {
		err := r.ReadLedger(ctx, read)
		switch {
		case err == nil:
			return pv, nil
		case !errors.Is(err, ledger.ErrNotCreated):
			// A run without the ledger's identity would be taken by a
			// worker of any ledger.
			return RunPreview{}, err
		}
		// No ledger yet: the worker's first start creates it.
		pv.Existing, pv.EpisodeID = false, ""
	}
	pv.Forecast, err = ForecastBudgets(ctx, nil, r.Pipelines, p.Name, []time.Time{rk.Nominal})
	return pv, err
}

// Start starts (or finds) the ScheduledRun a preview resolved; wait waits
// for its result.
func (r *Runs) Start(ctx context.Context, pv RunPreview, wait bool) (RunResult, error) {
	p, err := r.Pipelines.Get(pv.Pipeline)
	if err != nil {
		return RunResult{}, err
	}
	key, nominal := pv.Key, pv.Nominal
	rerun := false
	desc, err := r.Client.DescribeWorkflowExecution(ctx, key, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		desc = nil
	case err != nil:
		return RunResult{}, fmt.Errorf("look up workflow %q: %w", key, err)
	}
	if desc != nil {
		info := desc.GetWorkflowExecutionInfo()
		if err := r.checkSamePeriod(ctx, p, key, info.GetExecution().GetRunId(), nominal); err != nil {
			return RunResult{}, err
		}
		switch info.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return r.follow(ctx, RunAttached, key, info.GetExecution().GetRunId(), wait)
		case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			existing, err := r.follow(ctx, RunExisting, key, info.GetExecution().GetRunId(), true)
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
	opts := workflows.ScheduledRunStartOptions(reuse, workflows.ScheduledRunStart{Pipeline: p.Name, Run: allot.RunKey{Key: key, Nominal: nominal}, TaskQueue: r.TaskQueue})
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	run, err := r.Client.ExecuteWorkflow(ctx, opts,
		workflows.ScheduledRunWorkflow, workflows.ScheduledRunInput{Pipeline: p.Name, NominalTime: nominal, LedgerID: pv.LedgerID})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		// Another start won since our look-up: attach to it, or report it
		// if it has finished already.
		return r.attach(ctx, key, already.RunId, wait)
	}
	if err != nil {
		return RunResult{}, fmt.Errorf("start ScheduledRun %q: %w", key, err)
	}
	return r.follow(ctx, RunStarted, key, run.GetRunID(), wait)
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
