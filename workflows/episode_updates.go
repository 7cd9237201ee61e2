package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/paidvendor"
	"allot/pipeline"
)

// validator refuses, before anything enters history, a command that is
// malformed or that the episode's current state does not allow (see
// allot.PaidCommandTable): the caller gets the error at once and nothing
// changes. A command that arrives before the episode is loaded (with an
// Update-With-Start) is checked by its handler once it is.
func (e *episode) validator(update string) func(workflow.Context, DecisionRequest) error {
	return func(_ workflow.Context, req DecisionRequest) error {
		if err := validateShape(update, req); err != nil {
			return err
		}
		if !e.loaded {
			return nil
		}
		if err := e.admissible(update, req); err != nil {
			return err
		}
		if update == ReassembleUpdate {
			// Checked here only: the handler's check is replayed
			// (commandTableChange), a validator's is not.
			return e.reassembleRefusal()
		}
		return nil
	}
}

// reassembleRefusal refuses a reassemble before the episode's assembly
// ran (allot.CheckReassemble), naming what does move the episode on.
func (e *episode) reassembleRefusal() error {
	name, status := "", allot.StepStatus("")
	for _, s := range e.state.Steps {
		if allot.StepKind(s.Kind) == allot.KindLocal && s.Action == pipeline.ActionAssemble {
			name, status = s.Name, s.Status
			break
		}
	}
	err := allot.CheckReassemble(name, status)
	if err == nil {
		return nil
	}
	next := "it assembles when it reaches that step"
	if a := e.state.Attention; a != nil && len(a.Remedies) > 0 {
		next = fmt.Sprintf("the episode is parked on step %s (%s): run one of `%s`", a.Step, a.ErrorType, strings.Join(a.Remedies, "`, `"))
	} else if w := e.state.Waiting; w != nil && w.Remedy != "" {
		next = fmt.Sprintf("step %s waits for vendor %s: it goes on by itself, or `%s`", w.Step, w.Vendor, w.Remedy)
	}
	return temporal.NewApplicationError(fmt.Sprintf("episode %s/%s: %v; %s", e.input.Pipeline, e.input.EpisodeID, err, next), allot.NotReady)
}

// validateShape rejects malformed commands.
func validateShape(update string, req DecisionRequest) error {
	bad := func(format string, args ...any) error {
		return temporal.NewApplicationError(fmt.Sprintf(format, args...), allot.InvalidInput)
	}
	switch update {
	case RejectUpdate:
		// docs/design.md, "Every parked state has an exit": a rejection
		// needs a reason, whoever sends it.
		if strings.TrimSpace(req.Reason) == "" {
			return bad("reject needs a reason: --reason TEXT")
		}
	case ReworkUpdate:
		if req.Step == "" {
			return bad("rework needs a step: --step NAME")
		}
	case ResolveUpdate:
		if req.Step == "" {
			return bad("resolve needs a step: --step NAME")
		}
		switch req.Resolve {
		case allot.ActionAdopt:
			if req.RemoteRef == "" {
				return bad("resolve --adopt needs the vendor's task reference: find it with `starter episode lookup`")
			}
		case allot.ActionResubmit, allot.ActionRetry:
		case allot.ActionAbandon:
			if req.Reason == "" {
				return bad("resolve --abandon needs a reason: --reason TEXT")
			}
		default:
			return bad("resolve takes one of --adopt REF, --resubmit, --retry or --abandon --reason TEXT, got %q", req.Resolve)
		}
	}
	return nil
}

// admissible checks a command against the episode's stage and, for a paid
// step, against the command table for the step's task state and the
// attention the episode is parked with. A refusal is NotReady.
func (e *episode) admissible(update string, req DecisionRequest) error {
	notReady := func(err error) error {
		return temporal.NewApplicationError(fmt.Sprintf("episode %s/%s: %v", e.input.Pipeline, e.input.EpisodeID, err), allot.NotReady)
	}
	switch update {
	case ApproveUpdate, RejectUpdate, ReassembleUpdate:
		action := map[string]allot.Action{ApproveUpdate: allot.ActionApprove, RejectUpdate: allot.ActionReject, ReassembleUpdate: allot.ActionReassemble}[update]
		if err := allot.EpisodeActionAllowed(action, e.state.Stage, e.approvals()); err != nil {
			return notReady(err)
		}
		return nil
	}
	action := allot.ActionRework
	if update == ResolveUpdate {
		action = req.Resolve
	}
	step, ok := e.step(req.Step)
	// Rework is for paid steps; resolve for any step that can park.
	if !ok || allot.StepKind(step.Kind).Gate() || action == allot.ActionRework && !allot.StepKind(step.Kind).Costs() {
		var names []string
		for _, s := range e.state.Steps {
			if allot.StepKind(s.Kind).Costs() || action != allot.ActionRework && !allot.StepKind(s.Kind).Gate() {
				names = append(names, s.Name)
			}
		}
		return temporal.NewApplicationError(fmt.Sprintf("episode %s/%s has no step %q that takes %s: the steps that do are %v", e.input.Pipeline, e.input.EpisodeID, req.Step, action, names), allot.StepNotFound)
	}
	attention := ""
	if a := e.state.Attention; a != nil && a.Step == step.Name {
		attention = a.ErrorType
	} else if e.waitingStep == step.Name {
		attention = allot.AttentionWaitingVendor
	}
	if err := allot.CheckPaidAction(action, step.Name, taskState(step), attention); err != nil {
		return notReady(err)
	}
	return nil
}

// approvals are the statuses of the episode's approval steps, in order.
func (e *episode) approvals() []allot.StepStatus {
	out := []allot.StepStatus{}
	for _, s := range e.state.Steps {
		if allot.StepKind(s.Kind).Gate() {
			out = append(out, s.Status)
		}
	}
	return out
}

func (e *episode) step(name string) (activities.StepState, bool) {
	for _, s := range e.state.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return activities.StepState{}, false
}

// taskState is a paid step's latest task state; for a state loaded by an
// older worker, which did not send it, it is read off the step's status.
func taskState(s activities.StepState) allot.PaidTaskState {
	if s.TaskState != "" {
		return s.TaskState
	}
	switch s.Status {
	case allot.StepPending:
		return allot.PaidPlanned
	case allot.StepCompleted:
		return allot.PaidSucceeded
	}
	return allot.PaidTaskState(s.Status)
}

// awaitTurn waits until the episode is loaded and its main loop is idle
// (waiting for an operator, or finished) and no other command is being
// applied; then it holds the turn until release. It checks the command
// against the state it finds then.
func (e *episode) awaitTurn(ctx workflow.Context, update string, req DecisionRequest) (release func(), err error) {
	// A step that waits for its vendor takes its abandon while it waits.
	abandonsWait := func() bool {
		return update == ResolveUpdate && req.Resolve == allot.ActionAbandon && req.Step != "" && req.Step == e.waitingStep
	}
	if err := workflow.Await(ctx, func() bool { return e.loadErr != nil || (e.loaded && (e.idle || abandonsWait()) && !e.busy) }); err != nil {
		return nil, err
	}
	if e.loadErr != nil {
		return nil, e.loadErr
	}
	if workflow.GetVersion(ctx, commandTableChange, workflow.DefaultVersion, commandTableVersion) == commandTableVersion {
		if err := e.admissible(update, req); err != nil {
			return nil, err
		}
	}
	e.busy = true
	return func() { e.busy = false }, nil
}

// decide applies a decision through the ledger and takes the ledger's view of
// the steps; the main loop picks the work up from there.
func (e *episode) decide(ctx workflow.Context, in activities.DecisionInput) (EpisodeState, error) {
	var a *activities.Activities
	in.RequestID = workflow.GetCurrentUpdateInfo(ctx).ID
	in.Pipeline, in.EpisodeID, in.LedgerID = e.input.Pipeline, e.input.EpisodeID, e.input.LedgerID
	if in.Action == allot.ActionAdopt {
		if st, ok := e.step(in.Step); ok && st.Run != nil && st.Run.Vendor != nil {
			// An activity adapter's vendor is asked by its own activity.
			v := st.Run.Vendor
			var t paidvendor.ActivityTask
			err := workflow.ExecuteActivity(e.adapterCtx(ctx, v), v.Status, paidvendor.ActivityTaskRequest{ID: in.RemoteRef}).Get(ctx, &t)
			if errorType(err) == paidvendor.ActivityErrNotFound {
				return EpisodeState{}, temporal.NewApplicationError(fmt.Sprintf("vendor %s has no task %q: find this step's task with `%s`",
					v.Name, in.RemoteRef, allot.LookupCommand(e.input.Pipeline, e.input.EpisodeID, in.Step)), allot.InvalidRemoteRef)
			}
			if err != nil {
				return EpisodeState{}, err
			}
			task, err := t.Task()
			if err != nil {
				return EpisodeState{}, temporal.NewApplicationError(err.Error(), allot.InvalidRemoteRef)
			}
			in.Verified = &task
		}
	}
	var res activities.DecisionResult
	opts := ledgerActivityOptions()
	if in.Action == allot.ActionAdopt {
		opts = vendorActivityOptions() // it asks the vendor about the reference
	}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.ApplyDecision, in).Get(ctx, &res); err != nil {
		return EpisodeState{}, err
	}
	e.state.Steps = res.Steps
	if e.state.Attention != nil && e.state.Attention.Step == res.Step {
		e.state.Attention = nil
	}
	e.generation++
	return e.state, nil
}

func (e *episode) approve(action allot.Action) func(workflow.Context, DecisionRequest) (EpisodeState, error) {
	update := ApproveUpdate
	if action == allot.ActionReject {
		update = RejectUpdate
	}
	return func(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
		release, err := e.awaitTurn(ctx, update, req)
		if err != nil {
			return EpisodeState{}, err
		}
		defer release()
		if err := allot.EpisodeActionAllowed(action, e.state.Stage, e.approvals()); err != nil {
			return EpisodeState{}, temporal.NewApplicationError(fmt.Sprintf("episode %s: %v", e.input.EpisodeID, err), allot.NotReady)
		}
		return e.decide(ctx, activities.DecisionInput{Action: action, Reason: req.Reason, By: req.By})
	}
}

func (e *episode) rework(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx, ReworkUpdate, req)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	return e.decide(ctx, activities.DecisionInput{Action: allot.ActionRework, Step: req.Step, Reason: req.Reason, By: req.By})
}

func (e *episode) reassemble(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx, ReassembleUpdate, req)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	return e.decide(ctx, activities.DecisionInput{Action: allot.ActionReassemble, Reason: req.Reason, By: req.By})
}

func (e *episode) resolve(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx, ResolveUpdate, req)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	if req.Resolve == allot.ActionAbandon && req.Step == e.waitingStep && e.stopWait == nil {
		return e.abandonWaiting(ctx, req)
	}
	if e.state.Attention == nil || e.state.Attention.Step != req.Step {
		return EpisodeState{}, temporal.NewApplicationError(
			fmt.Sprintf("step %s of episode %s has no unresolved outcome: resolve is for a paid step that needs attention", req.Step, e.input.EpisodeID), allot.NotReady)
	}
	return e.decide(ctx, activities.DecisionInput{Action: req.Resolve, Step: req.Step, RemoteRef: req.RemoteRef, Reason: req.Reason, By: req.By})
}
