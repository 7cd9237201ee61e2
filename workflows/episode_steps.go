package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/pipeline"
	"allot/step"
)

// stepActivityOptions are for a step this worker runs (local, go, exec):
// its timeout, and a heartbeat that brings a killed worker's run back in
// seconds (the runner heartbeats while the step's code runs).
func stepActivityOptions(run *activities.StepRun) workflow.ActivityOptions {
	o := ledgerActivityOptions()
	o.HeartbeatTimeout = vendorHeartbeat
	if run != nil && run.Timeout > 0 {
		// The step's own timeout is enforced by the runner (an exec
		// step's process group is killed); the activity gets a margin to
		// record what happened.
		o.StartToCloseTimeout = run.Timeout + time.Minute
	}
	return o
}

// runActivityStep runs an activity step: allot gives its input, the
// step's activity runs on its own task queue (a worker in any language),
// and allot records what it returned. A failure retrying will not fix (a
// non-retryable error, or the last attempt of the step's retry policy)
// parks the episode (StepFailure) until an operator retries or abandons the
// step.
func (e *episode) runActivityStep(ctx workflow.Context, i int, ref activities.RunLocalStepInput) error {
	var a *activities.Activities
	st := e.state.Steps[i]
	run := st.Run
	if run == nil || run.Activity == "" {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("activity step %s names no activity", st.Name), allot.InvalidInput, nil)
	}
	var prep activities.PrepareStepResult
	if err := e.call(e.ledgerCtx(ctx), st.Name, "PrepareStep", a.PrepareStep, ref, &prep); err != nil {
		return err
	}
	if prep.Done != nil {
		prep.Done.Run = run
		e.state.Steps[i] = *prep.Done
		return nil
	}
	opts := workflow.ActivityOptions{
		TaskQueue:           run.TaskQueue,
		StartToCloseTimeout: run.Timeout,
		HeartbeatTimeout:    run.Heartbeat,
		RetryPolicy:         userRetryPolicy(run.Retry),
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	var out step.Output
	var err error
	if opts.RetryPolicy.MaximumAttempts > 0 {
		// The step bounds its attempts: the last failure parks.
		err = workflow.ExecuteActivity(actx, run.Activity, prep.Input).Get(ctx, &out)
	} else {
		err = e.call(actx, st.Name, run.Activity, run.Activity, prep.Input, &out)
	}
	if err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		return e.park(ctx, i, allot.StepFailure, err)
	}
	var done activities.StepState
	err = e.call(e.ledgerCtx(ctx), st.Name, "RecordStepOutput", a.RecordStepOutput, activities.RecordStepOutputInput{
		RunLocalStepInput: ref, Revision: prep.Input.Revision, Output: out,
	}, &done)
	if errorType(err) == allot.StepFailure {
		return e.park(ctx, i, allot.StepFailure, err)
	}
	if err != nil {
		return err
	}
	done.Run = run
	e.state.Steps[i] = done
	return nil
}

// userRetryPolicy is an activity step's retry policy from its pipeline
// file, on Temporal's defaults.
func userRetryPolicy(r *pipeline.Retry) *temporal.RetryPolicy {
	p := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute}
	if r == nil {
		return p
	}
	if d, err := time.ParseDuration(r.InitialInterval); err == nil && d > 0 {
		p.InitialInterval = d
	}
	if r.BackoffCoefficient >= 1 {
		p.BackoffCoefficient = r.BackoffCoefficient
	}
	if d, err := time.ParseDuration(r.MaximumInterval); err == nil && d > 0 {
		p.MaximumInterval = d
	}
	p.MaximumAttempts = int32(r.MaximumAttempts)
	return p
}

func (e *episode) runStep(ctx workflow.Context, i int) error {
	var a *activities.Activities
	step := e.state.Steps[i]
	e.state.CurrentStep = step.Name
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Running step **%s** (%s), %d of %d.", step.Name, step.Kind, i+1, len(e.state.Steps)))
	defer func() { e.state.CurrentStep = "" }()
	ref := activities.RunLocalStepInput{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Step: step.Name}
	switch step.Kind {
	case string(allot.KindLocal), string(allot.KindGo), string(allot.KindExec):
		fn, name := a.RunLocalStep, "RunLocalStep"
		if step.Kind == string(allot.KindExec) {
			fn, name = a.RunExecStep, "RunExecStep"
		}
		var done activities.StepState
		err := e.call(workflow.WithActivityOptions(ctx, stepActivityOptions(step.Run)), step.Name, name, fn, ref, &done)
		if errorType(err) == allot.StepFailure {
			return e.park(ctx, i, allot.StepFailure, err)
		}
		if err != nil {
			return err
		}
		done.Run = step.Run
		e.state.Steps[i] = done
		return nil
	case string(allot.KindActivity):
		return e.runActivityStep(ctx, i, ref)
	case string(allot.KindPaid), string(allot.KindEffect):
		var err error
		switch {
		case step.Run != nil && step.Run.Batch:
			err = e.runPaidInBatch(ctx, i)
		case step.Run != nil && step.Run.Vendor != nil:
			err = e.runPaidByActivities(ctx, i)
		default:
			err = e.runPaid(ctx, i)
		}
		if errors.Is(err, errWaitAbandoned) {
			// Abandoned while it waited for its vendor: the decision
			// settled it (e.state.Steps); the episode goes on.
			return nil
		}
		return err
	case string(allot.KindApproval):
		return e.awaitApproval(ctx, i)
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("step %q has kind %q, which this worker cannot run", step.Name, step.Kind), allot.InvalidInput, nil)
}

func (e *episode) awaitApproval(ctx workflow.Context, i int) error {
	step := e.state.Steps[i]
	if e.autoApprove {
		var a *activities.Activities
		var res activities.DecisionResult
		if err := e.call(e.ledgerCtx(ctx), step.Name, "ApplyDecision", a.ApplyDecision, activities.DecisionInput{
			RequestID: "auto-approve/" + e.input.EpisodeID + "/" + workflow.GetInfo(ctx).WorkflowExecution.RunID,
			Pipeline:  e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Action: allot.ActionApprove,
			Reason: "pipeline approves automatically (auto_approve = true)",
		}, &res); err != nil {
			return err
		}
		e.state.Steps = res.Steps
		return nil
	}
	if err := e.setStage(ctx, allot.StageWaitingApproval); err != nil {
		return err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**Waiting for approval** at step **%s**.\n\n- `%s`\n- `%s`\n\n%s",
		step.Name, allot.ApproveCommand(e.input.Pipeline, e.input.EpisodeID), allot.RejectCommand(e.input.Pipeline, e.input.EpisodeID, "rejected at the approval step"), stepTable(e.state.Steps)))
	// A decision ends the wait: approve or reject, or a rework or
	// reassembly that reopened earlier steps.
	gen := e.generation
	if err := e.waitIdle(ctx, func() bool { return e.generation != gen }); err != nil {
		return err
	}
	if e.nextStep() < 0 {
		return nil
	}
	return e.setStage(ctx, allot.StageRunning)
}
