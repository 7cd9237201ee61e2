package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// ScheduledRunInput starts one logical run of a pipeline. The allocation key
// is the workflow ID, never part of the input.
type ScheduledRunInput struct {
	Pipeline string `json:"pipeline"`
	// NominalTime is when the run was planned. Leave it out for scheduled
	// runs: the Schedule's TemporalScheduledStartTime is used.
	NominalTime time.Time `json:"nominal_time,omitzero"`
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
	r.result = ScheduledRunResult{
		WorkflowID: info.WorkflowExecution.ID,
		Pipeline:   r.input.Pipeline,
		Sequence:   -1,
	}
	switch scheduled, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(ScheduledStartTimeAttr); {
	case !r.input.NominalTime.IsZero():
		r.result.NominalTime, r.result.NominalTimeSource = r.input.NominalTime.UTC(), allot.NominalFromInput
	case ok && !scheduled.IsZero():
		r.result.NominalTime, r.result.NominalTimeSource = scheduled.UTC(), allot.NominalFromSchedule
	default:
		r.result.NominalTime, r.result.NominalTimeSource = info.WorkflowStartTime.UTC(), allot.NominalFromStartTime
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (ScheduledRunResult, error) { return r.result, nil }); err != nil {
		return err
	}
	return workflow.UpsertTypedSearchAttributes(ctx, PipelineAttr.ValueSet(r.input.Pipeline))
}

func (r *scheduledRun) run(ctx workflow.Context) (ScheduledRunResult, error) {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, allocationActivityOptions())

	var alloc activities.AllocateResult
	err := workflow.ExecuteActivity(actx, a.Allocate, activities.AllocateInput{
		Pipeline:    r.input.Pipeline,
		Key:         r.result.WorkflowID,
		NominalTime: r.result.NominalTime,
	}).Get(ctx, &alloc)
	if err != nil {
		return r.fail(ctx, actx, err)
	}
	r.result.Outcome, r.result.Reason = alloc.Decision, alloc.Reason
	r.result.EpisodeID, r.result.Period, r.result.Sequence = alloc.EpisodeID, alloc.Period, alloc.Sequence

	if alloc.EpisodeID != "" {
		if err := workflow.UpsertTypedSearchAttributes(ctx,
			EpisodeAttr.ValueSet(alloc.EpisodeID),
			PeriodAttr.ValueSet(alloc.Period),
			SequenceAttr.ValueSet(int64(alloc.Sequence)),
		); err != nil {
			return ScheduledRunResult{}, err
		}
		if err := r.startEpisode(ctx); err != nil {
			return r.fail(ctx, actx, err)
		}
	} else if alloc.Period != "" {
		if err := workflow.UpsertTypedSearchAttributes(ctx, PeriodAttr.ValueSet(alloc.Period)); err != nil {
			return ScheduledRunResult{}, err
		}
	}
	if err := r.record(ctx, actx); err != nil {
		return ScheduledRunResult{}, err
	}
	return r.result, nil
}

// startEpisode starts the Episode workflow and lets it outlive this run. An
// Episode that already runs, or already completed, is the one this run owns.
func (r *scheduledRun) startEpisode(ctx workflow.Context) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            EpisodeWorkflowID(r.result.Pipeline, r.result.EpisodeID),
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
	})
	var exec workflow.Execution
	err := workflow.ExecuteChildWorkflow(cctx, Episode, EpisodeInput{
		Pipeline:  r.result.Pipeline,
		EpisodeID: r.result.EpisodeID,
	}).GetChildWorkflowExecution().Get(ctx, &exec)
	var already *temporal.ChildWorkflowExecutionAlreadyStartedError
	if errors.As(err, &already) {
		workflow.GetLogger(ctx).Info("episode workflow already exists", "episode", r.result.EpisodeID)
		return nil
	}
	return err
}

func (r *scheduledRun) record(ctx, actx workflow.Context) error {
	var a *activities.Activities
	if err := workflow.ExecuteActivity(actx, a.RecordRunOutcome, activities.RecordRunOutcomeInput{
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
	}).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(string(r.result.Outcome)))
}

// fail records a failed run with the error's type as its reason, then fails
// the workflow with the original error so callers can match its type.
func (r *scheduledRun) fail(ctx, actx workflow.Context, cause error) (ScheduledRunResult, error) {
	r.result.Outcome, r.result.Reason = allot.OutcomeFailed, errorType(cause)
	if err := r.record(ctx, actx); err != nil {
		workflow.GetLogger(ctx).Error("recording the failed outcome failed", "error", err)
	}
	return ScheduledRunResult{}, cause
}

// errorType is the application error type behind err, or "error".
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return appErr.Type()
	}
	return "error"
}
