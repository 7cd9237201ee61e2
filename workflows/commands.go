package workflows

import (
	"allot"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot/activities"
)

// validateDecision rejects malformed commands before they enter history.
func validateDecision(update string) func(workflow.Context, DecisionRequest) error {
	return func(_ workflow.Context, req DecisionRequest) error {
		bad := func(format string, args ...any) error {
			return temporal.NewApplicationError(fmt.Sprintf(format, args...), allot.InvalidInput)
		}
		switch update {
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
					return bad("resolve --adopt needs the vendor's task reference")
				}
			case allot.ActionResubmit:
			case allot.ActionAbandon:
				if req.Reason == "" {
					return bad("resolve --abandon needs a reason: --reason TEXT")
				}
			default:
				return bad("resolve takes one of --adopt REF, --resubmit or --abandon --reason TEXT, got %q", req.Resolve)
			}
		}
		return nil
	}
}

// awaitTurn waits until the episode is loaded and its main loop is idle
// (waiting for an operator, or finished) and no other command is being
// applied; then it holds the turn until release.
func (e *episode) awaitTurn(ctx workflow.Context) (release func(), err error) {
	if err := workflow.Await(ctx, func() bool { return e.loadErr != nil || (e.loaded && e.idle && !e.busy) }); err != nil {
		return nil, err
	}
	if e.loadErr != nil {
		return nil, e.loadErr
	}
	e.busy = true
	return func() { e.busy = false }, nil
}

// decide applies a decision through the ledger and takes the ledger's view of
// the steps; the main loop picks the work up from there.
func (e *episode) decide(ctx workflow.Context, in activities.DecisionInput) (EpisodeState, error) {
	var a *activities.Activities
	in.RequestID = workflow.GetCurrentUpdateInfo(ctx).ID
	in.Pipeline, in.EpisodeID = e.input.Pipeline, e.input.EpisodeID
	var res activities.DecisionResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, episodeActivityOptions()), a.ApplyDecision, in).Get(ctx, &res); err != nil {
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
	return func(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
		release, err := e.awaitTurn(ctx)
		if err != nil {
			return EpisodeState{}, err
		}
		defer release()
		if e.state.Stage != allot.StageWaitingApproval {
			return EpisodeState{}, temporal.NewApplicationError(
				fmt.Sprintf("episode %s is %s, not waiting for approval: %s it once it reaches the approval step", e.input.EpisodeID, e.state.Stage, action), allot.NotReady)
		}
		return e.decide(ctx, activities.DecisionInput{Action: action, Reason: req.Reason})
	}
}

func (e *episode) rework(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	return e.decide(ctx, activities.DecisionInput{Action: allot.ActionRework, Step: req.Step, Reason: req.Reason})
}

func (e *episode) reassemble(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	return e.decide(ctx, activities.DecisionInput{Action: allot.ActionReassemble, Reason: req.Reason})
}

func (e *episode) resolve(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	release, err := e.awaitTurn(ctx)
	if err != nil {
		return EpisodeState{}, err
	}
	defer release()
	if e.state.Attention == nil || e.state.Attention.Step != req.Step {
		return EpisodeState{}, temporal.NewApplicationError(
			fmt.Sprintf("step %s of episode %s has no unresolved outcome: resolve is for a paid step that needs attention", req.Step, e.input.EpisodeID), allot.NotReady)
	}
	return e.decide(ctx, activities.DecisionInput{Action: req.Resolve, Step: req.Step, RemoteRef: req.RemoteRef, Reason: req.Reason})
}
