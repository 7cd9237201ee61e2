package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/pipeline"
)

// ScheduledRunInput starts one logical run of a pipeline. The allocation key
// is the workflow ID, never part of the input.
type ScheduledRunInput struct {
	Pipeline string `json:"pipeline"`
	// NominalTime is when the run was planned. Leave it out for scheduled
	// runs: the Schedule's TemporalScheduledStartTime is used.
	NominalTime time.Time `json:"nominal_time,omitzero"`
	// LedgerID, when set (starter and the pipeline's Schedule set it), is
	// the ledger the run must be allocated in: a worker of another ledger
	// refuses it (LedgerMismatch).
	LedgerID string `json:"ledger_id,omitempty"`
	// EpisodePriority, when set (a fast backfill sets it), is the Temporal
	// task priority key of the Episode this run starts; 0: the Episode
	// inherits the run's. A backfill ranks its episodes' work below its
	// runs' allocations, so its runs record their outcomes first.
	EpisodePriority int `json:"episode_priority,omitempty"`
}

// ScheduledRunResult says which episode the run owns and why.
type ScheduledRunResult struct {
	WorkflowID        string                  `json:"workflow_id"`
	Pipeline          string                  `json:"pipeline"`
	EpisodeID         string                  `json:"episode_id"`
	Period            string                  `json:"period"`
	Sequence          int                     `json:"sequence"`
	Outcome           allot.Outcome           `json:"outcome"`
	Reason            string                  `json:"reason"`
	NominalTime       time.Time               `json:"nominal_time"`
	NominalTimeSource allot.NominalTimeSource `json:"nominal_time_source"`
	// Input is the input the episode claimed, for pipelines that consume
	// inputs.
	Input string `json:"input,omitempty"`
}

// allocationActivityOptions retries transient failures with backoff and stops
// on invariant failures.
func allocationActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: allot.NonRetryableErrorTypes,
		},
	}
}

type scheduledRun struct {
	input  ScheduledRunInput
	result ScheduledRunResult
	runID  string
	// refused: the start itself is wrong (a key of another pipeline, no
	// nominal time); the run allocates nothing and fails with it.
	refused error
	// ledgerID is the ledger that allocated the run.
	ledgerID string
	// local: the ledger's activities run as local activities
	// (localBookkeepingChange).
	local bool
	// lean: no search attribute is upserted to the value it already has,
	// and the allocation's attributes go with the outcome's
	// (localBookkeepingChange, version leanRunVersion).
	lean bool
	// pending are attribute updates the outcome's upsert carries (lean).
	pending []temporal.SearchAttributeUpdate
}

// ScheduledRun is the zero-cost allocation phase: it decides which episode
// this run owns, starts that episode's workflow, records the outcome, and ends.
func ScheduledRun(ctx workflow.Context, in ScheduledRunInput) (ScheduledRunResult, error) {
	r := &scheduledRun{input: in}
	if err := r.setup(ctx); err != nil {
		return ScheduledRunResult{}, err
	}
	return r.run(ctx)
}

func (r *scheduledRun) setup(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	r.runID = info.WorkflowExecution.RunID
	// A run stamped with a ledger records only in that ledger: until the
	// allocation names the ledger, the stamp is the one to check against.
	r.ledgerID = r.input.LedgerID
	r.result = ScheduledRunResult{
		WorkflowID: info.WorkflowExecution.ID,
		Pipeline:   r.input.Pipeline,
		Sequence:   -1,
	}
	r.refused = r.resolveNominalTime(ctx)
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (ScheduledRunResult, error) { return r.result, nil }); err != nil {
		return err
	}
	if r.refused == nil {
		// Asked before the first upsert, which the lean version skips when
		// the start gave the attribute already (every start of allot's
		// does). Histories that asked it later replay the same: version
		// markers are not matched by position.
		v := workflow.GetVersion(ctx, localBookkeepingChange, workflow.DefaultVersion, leanRunVersion)
		r.local, r.lean = v >= localBookkeepingVersion, v >= leanRunVersion
	}
	if r.lean {
		if have, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(PipelineAttr); have == r.input.Pipeline {
			return nil
		}
	}
	return workflow.UpsertTypedSearchAttributes(ctx, PipelineAttr.ValueSet(r.input.Pipeline))
}

// resolveNominalTime checks that the key (the workflow ID) is this
// pipeline's and finds the run's nominal time (invariant 12): the input's;
// else the Schedule's TemporalScheduledStartTime; else the time a key in the
// Schedule's form carries; else, for a Schedule's start without the search
// attribute, the start time. Never the wall clock for anything else: a
// custom key without a nominal time is refused.
func (r *scheduledRun) resolveNominalTime(ctx workflow.Context) error {
	key, p := r.result.WorkflowID, r.input.Pipeline
	if !strings.HasPrefix(key, allot.KeyPrefix(p)) {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("workflow ID %q is not a key of pipeline %s: every ScheduledRun key starts with %q; start it as `starter run --pipeline %s --key ...` does", key, p, allot.KeyPrefix(p), p),
			allot.InvalidAllocationKey, nil)
	}
	attrs := workflow.GetTypedSearchAttributes(ctx)
	keyTime, keyHasTime := allot.NominalTimeOfKey(p, key)
	scheduled, fromSchedule := attrs.GetTime(ScheduledStartTimeAttr)
	_, bySchedule := attrs.GetKeyword(ScheduledByIDAttr)
	switch {
	case !r.input.NominalTime.IsZero():
		r.result.NominalTime, r.result.NominalTimeSource = r.input.NominalTime.UTC(), allot.NominalFromInput
		if keyHasTime && !r.result.NominalTime.Truncate(time.Second).Equal(keyTime) {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("key %q carries nominal time %s, but the input says %s: a key belongs to one nominal time; leave the input's out, or use the key of %s",
					key, keyTime.Format(time.RFC3339), r.result.NominalTime.Format(time.RFC3339), r.result.NominalTime.Format(time.RFC3339)),
				allot.InvalidInput, nil)
		}
	case fromSchedule && !scheduled.IsZero():
		r.result.NominalTime, r.result.NominalTimeSource = scheduled.UTC(), allot.NominalFromSchedule
	case keyHasTime:
		r.result.NominalTime, r.result.NominalTimeSource = keyTime, allot.NominalFromKey
	case bySchedule:
		r.result.NominalTime, r.result.NominalTimeSource = workflow.GetInfo(ctx).WorkflowStartTime.UTC(), allot.NominalFromStartTime
	default:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("key %q carries no nominal time and the start gave none: start it with one, e.g. `starter run --pipeline %s --key %s --nominal-time 2026-08-03T02:00:00Z` (or \"nominal_time\" in the workflow input)",
				key, p, strings.TrimPrefix(key, allot.KeyPrefix(p))),
			allot.InvalidInput, nil)
	}
	return nil
}

func (r *scheduledRun) run(ctx workflow.Context) (ScheduledRunResult, error) {
	var a *activities.Activities
	if r.refused != nil {
		// Nothing is allocated for a start that names no time or another
		// pipeline's key; the failure says why, and there is no nominal
		// time to record the run under.
		r.result.Outcome, r.result.Reason = allot.OutcomeFailed, errorType(r.refused)
		if err := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(string(allot.OutcomeFailed))); err != nil {
			return ScheduledRunResult{}, err
		}
		return ScheduledRunResult{}, r.refused
	}

	skip, err := r.catchUp(ctx)
	if err != nil {
		return r.fail(ctx, err)
	}
	if skip {
		if err := r.record(ctx); err != nil {
			return ScheduledRunResult{}, err
		}
		return r.result, nil
	}
	var alloc activities.AllocateResult
	err = r.exec(ctx, a.Allocate, activities.AllocateInput{
		Pipeline:    r.input.Pipeline,
		Key:         r.result.WorkflowID,
		NominalTime: r.result.NominalTime,
		LedgerID:    r.input.LedgerID,
		RunID:       r.runID,
	}).Get(ctx, &alloc)
	if err != nil {
		return r.fail(ctx, err)
	}
	r.ledgerID = alloc.LedgerID
	r.result.Outcome, r.result.Reason = alloc.Decision, alloc.Reason
	r.result.EpisodeID, r.result.Period, r.result.Sequence = alloc.EpisodeID, alloc.Period, alloc.Sequence
	r.result.Input = alloc.Input

	if alloc.EpisodeID != "" {
		if err := r.upsert(ctx,
			EpisodeAttr.ValueSet(alloc.EpisodeID),
			PeriodAttr.ValueSet(alloc.Period),
			SequenceAttr.ValueSet(int64(alloc.Sequence)),
		); err != nil {
			return ScheduledRunResult{}, err
		}
		if err := r.startEpisode(ctx); err != nil {
			return r.fail(ctx, err)
		}
	} else if alloc.Period != "" {
		if err := r.upsert(ctx, PeriodAttr.ValueSet(alloc.Period)); err != nil {
			return ScheduledRunResult{}, err
		}
	}
	if err := r.record(ctx); err != nil {
		return ScheduledRunResult{}, err
	}
	return r.result, nil
}

// catchUp applies the pipeline's catch_up policy to a run its Schedule
// started that begins late (catchUpChange; docs/design.md, "Catch-up"): a
// missed time the policy does not run is skipped, reason missed_catch_up,
// before anything is allocated, so its key stays free for a later manual
// run or backfill. Runs started with a nominal time (starter run, a
// backfill, the catch-up sweep, which decided already) are never skipped
// here, nor is a backfill through the Schedule (the policy sees that the
// Schedule started it after its catchup_window), and a run that begins
// within MinCatchUpGrace asks nothing.
func (r *scheduledRun) catchUp(ctx workflow.Context) (skip bool, err error) {
	switch r.result.NominalTimeSource {
	case allot.NominalFromSchedule, allot.NominalFromStartTime:
	default:
		return false, nil
	}
	began := workflow.Now(ctx)
	if !began.After(r.result.NominalTime.Add(pipeline.MinCatchUpGrace)) {
		return false, nil
	}
	if workflow.GetVersion(ctx, catchUpChange, workflow.DefaultVersion, catchUpVersion) == workflow.DefaultVersion {
		return false, nil
	}
	var a *activities.Activities
	var d activities.DecideCatchUpResult
	lctx := workflow.WithLocalActivityOptions(ctx, localOptions(allocationActivityOptions()))
	if err := workflow.ExecuteLocalActivity(lctx, a.DecideCatchUp, activities.DecideCatchUpInput{
		Pipeline: r.input.Pipeline, NominalTime: r.result.NominalTime, BeganAt: began,
		StartedAt: workflow.GetInfo(ctx).WorkflowStartTime,
		Key:       r.result.WorkflowID,
		RunID:     r.runID,
	}).Get(ctx, &d); err != nil {
		return false, err
	}
	if d.Run {
		return false, nil
	}
	workflow.GetLogger(ctx).Info("missed time skipped by the catch-up policy", "nominal", r.result.NominalTime, "policy", d.Policy, "later_missed", d.LaterMissed)
	r.result.Outcome, r.result.Reason = allot.OutcomeSkipped, allot.ReasonMissedCatchUp
	return true, nil
}

// startEpisode starts the Episode workflow and lets it outlive this run. An
// Episode that already runs, or already completed, is the one this run owns.
func (r *scheduledRun) startEpisode(ctx workflow.Context) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            allot.EpisodeWorkflowID(r.result.Pipeline, r.result.EpisodeID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		StaticSummary:         fmt.Sprintf("%s episode %s (nominal %s)", r.result.Pipeline, r.result.EpisodeID, r.result.NominalTime.Format(time.RFC3339)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			PipelineAttr.ValueSet(r.result.Pipeline),
			EpisodeAttr.ValueSet(r.result.EpisodeID),
			PeriodAttr.ValueSet(r.result.Period),
			SequenceAttr.ValueSet(int64(r.result.Sequence)),
			OutcomeAttr.ValueSet(string(allot.OutcomeRunning)),
		),
		Memo: map[string]any{allot.LedgerMemo: r.ledgerID},
		// Zero sends no priority (the child inherits), so histories from
		// before this field replay unchanged.
		Priority: temporal.Priority{PriorityKey: r.input.EpisodePriority},
	})
	var exec workflow.Execution
	err := workflow.ExecuteChildWorkflow(cctx, Episode, EpisodeInput{
		Pipeline:  r.result.Pipeline,
		EpisodeID: r.result.EpisodeID,
		LedgerID:  r.ledgerID,
	}).GetChildWorkflowExecution().Get(ctx, &exec)
	var already *temporal.ChildWorkflowExecutionAlreadyStartedError
	if !errors.As(err, &already) {
		return err
	}
	workflow.GetLogger(ctx).Info("episode workflow already exists", "episode", r.result.EpisodeID)
	if workflow.GetVersion(ctx, verifyEpisodeLedgerChange, workflow.DefaultVersion, verifyEpisodeLedgerVersion) == workflow.DefaultVersion {
		return nil
	}
	// It is this run's episode only if this ledger started it: another
	// ledger on the namespace may have an episode of the same ID.
	var a *activities.Activities
	return r.exec(ctx, a.VerifyEpisodeLedger, activities.VerifyEpisodeLedgerInput{
		WorkflowID: allot.EpisodeWorkflowID(r.result.Pipeline, r.result.EpisodeID), LedgerID: r.ledgerID,
	}).Get(ctx, nil)
}

// exec runs one of allot's ledger activities for the run: a local activity
// from localBookkeepingChange on (the bookkeeping runs inside the workflow
// task, without a round trip through the task queue), a regular one in
// histories before it. Both are idempotent, as a local activity whose
// workflow task is lost runs again.
func (r *scheduledRun) exec(ctx workflow.Context, activity, in any) workflow.Future {
	if r.local {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localOptions(allocationActivityOptions())), activity, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, allocationActivityOptions()), activity, in)
}

func (r *scheduledRun) record(ctx workflow.Context) error {
	var a *activities.Activities
	if err := r.exec(ctx, a.RecordRunOutcome, activities.RecordRunOutcomeInput{
		Pipeline:          r.result.Pipeline,
		Key:               r.result.WorkflowID,
		RunID:             r.runID,
		NominalTime:       r.result.NominalTime,
		NominalTimeSource: r.result.NominalTimeSource,
		Outcome:           r.result.Outcome,
		Reason:            r.result.Reason,
		EpisodeID:         r.result.EpisodeID,
		Period:            r.result.Period,
		Sequence:          r.result.Sequence,
		RecordedAt:        workflow.Now(ctx),
		LedgerID:          r.ledgerID,
	}).Get(ctx, nil); err != nil {
		return err
	}
	attrs := append(r.pending, OutcomeAttr.ValueSet(string(r.result.Outcome)))
	r.pending = nil
	return workflow.UpsertTypedSearchAttributes(ctx, attrs...)
}

// upsert shows the allocation's attributes in the Web UI. The lean version
// holds them back for the outcome's upsert (record), one workflow task
// later: a visibility write less per run (issue 18).
func (r *scheduledRun) upsert(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	if r.lean {
		r.pending = append(r.pending, attrs...)
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(ctx, attrs...)
}

// fail records a failed run with the error's type as its reason, then fails
// the workflow with the original error so callers can match its type. A
// cancelled run records on a disconnected context: its own context is done.
func (r *scheduledRun) fail(ctx workflow.Context, cause error) (ScheduledRunResult, error) {
	r.result.Outcome, r.result.Reason = allot.OutcomeFailed, errorType(cause)
	if temporal.IsCanceledError(cause) || ctx.Err() != nil {
		r.result.Reason = reasonCanceled
		if !temporal.IsCanceledError(cause) {
			// A local activity's last attempt ends with its own error
			// when the run is cancelled between attempts: the run was
			// cancelled all the same.
			cause = temporal.NewCanceledError(cause.Error())
		}
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	if err := r.record(ctx); err != nil {
		workflow.GetLogger(ctx).Error("recording the failed outcome failed", "error", err)
	}
	return ScheduledRunResult{}, cause
}

// reasonCanceled is a cancelled run's reason.
const reasonCanceled = "canceled"

// errorType is the application error type behind err, or "error".
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return appErr.Type()
	}
	return "error"
}
