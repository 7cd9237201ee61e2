package activities

import (
	"allot"
	"context"
	"errors"
	"fmt"

	"allot/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// DecisionInput is one operator decision. RequestID (the Temporal update ID)
// makes applying it idempotent across activity retries.
type DecisionInput struct {
	RequestID string       `json:"request_id"`
	Pipeline  string       `json:"pipeline"`
	EpisodeID string       `json:"episode_id"`
	Action    allot.Action `json:"action"`
	Step      string       `json:"step,omitempty"`
	RemoteRef string       `json:"remote_ref,omitempty"`
	Reason    string       `json:"reason,omitempty"`
}

// DecisionResult is the episode's steps after the decision took effect.
type DecisionResult struct {
	Action   allot.Action `json:"action"`
	Step     string       `json:"step,omitempty"`
	Revision int          `json:"revision"`
	Steps    []StepState  `json:"steps"`
}

// ApplyDecision validates an operator decision against the ledger, applies
// its effect and records it with its reason. Nothing here allocates; a
// missing episode is allot.EpisodeNotFound before anything else.
func (a *Activities) ApplyDecision(ctx context.Context, in DecisionInput) (DecisionResult, error) {
	p, ep, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID})
	if err != nil {
		return DecisionResult{}, err
	}
	if in.RequestID == "" {
		return DecisionResult{}, nonRetryable(allot.InvalidInput, "decision %q on %s/%s has no request ID", in.Action, p.Name, ep.ID)
	}
	out := DecisionResult{Action: in.Action, Step: in.Step}
	switch in.Action {
	case allot.ActionApprove, allot.ActionReject:
		step, ok := approvalStep(p)
		if !ok {
			return DecisionResult{}, nonRetryable(allot.StepNotFound, "pipeline %q has no approval step: nothing to %s", p.Name, in.Action)
		}
		out.Step = step.Name
		status := allot.StepApproved
		if in.Action == allot.ActionReject {
			status = allot.StepRejected
		}
		if err := a.Ledger.RecordStep(ctx, ledger.StepRecord{Pipeline: p.Name, EpisodeID: ep.ID, Step: step.Name, Status: status}); err != nil {
			return DecisionResult{}, classify(err)
		}
	case allot.ActionReassemble:
		i, ok := firstAction(p, pipeline.ActionAssemble)
		if !ok {
			return DecisionResult{}, nonRetryable(allot.StepNotFound, "pipeline %q has no assemble step", p.Name)
		}
		out.Step = p.Steps[i].Name
		if err := a.Ledger.ResetSteps(ctx, p.Name, ep.ID, unpaidFrom(p, i)); err != nil {
			return DecisionResult{}, classify(err)
		}
	case allot.ActionRework, allot.ActionAdopt, allot.ActionResubmit, allot.ActionAbandon:
		rev, err := a.applyPaidDecision(ctx, p, ep, in)
		if err != nil {
			return DecisionResult{}, err
		}
		out.Revision = rev
	default:
		return DecisionResult{}, nonRetryable(allot.InvalidInput, "unknown decision %q: use approve, reject, rework, reassemble, adopt, resubmit or abandon", in.Action)
	}
	if _, _, err := a.Ledger.RecordDecision(ctx, ledger.OperatorDecision{
		RequestID: in.RequestID, Pipeline: p.Name, EpisodeID: ep.ID, Step: out.Step, Revision: out.Revision,
		Action: in.Action, RemoteRef: in.RemoteRef, Reason: in.Reason,
	}); err != nil {
		return DecisionResult{}, classify(err)
	}
	loaded, err := a.LoadEpisode(ctx, EpisodeRef{Pipeline: p.Name, EpisodeID: ep.ID})
	if err != nil {
		return DecisionResult{}, err
	}
	out.Steps = loaded.Steps
	return out, nil
}

func (a *Activities) applyPaidDecision(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, in DecisionInput) (int, error) {
	step, ok := p.Step(in.Step)
	if !ok || step.Kind != pipeline.Paid {
		return 0, nonRetryable(allot.StepNotFound, "pipeline %q has no paid step %q: its paid steps are %v", p.Name, in.Step, p.PaidStepNames())
	}
	if in.Action == allot.ActionRework {
		planned, err := a.Ledger.PlanRevision(ctx, p.Name, ep.ID, step.Name, in.RequestID)
		if err != nil {
			return 0, classify(err)
		}
		i, _ := stepIndex(p, step.Name)
		if err := a.Ledger.ResetSteps(ctx, p.Name, ep.ID, unpaidFrom(p, i+1)); err != nil {
			return 0, classify(err)
		}
		return planned.Revision, nil
	}

	latest, err := a.Ledger.LatestPaidTask(ctx, p.Name, ep.ID, step.Name)
	if err != nil {
		return 0, classify(err)
	}
	ref := latest.PaidTaskRef
	unknown := latest.State == allot.PaidIntent && latest.RemoteRef == ""
	switch in.Action {
	case allot.ActionAdopt:
		if !unknown {
			return 0, nonRetryable(allot.InvalidInput, "step %s revision %d is %s, not an unknown outcome: there is nothing to adopt", step.Name, ref.Revision, latest.State)
		}
		if err := paidvendor.ValidateTaskID(in.RemoteRef); err != nil {
			return 0, nonRetryable(allot.InvalidRemoteRef, "%v", err)
		}
		vendor, err := a.vendor(ctx)
		if err != nil {
			return 0, err
		}
		vt, err := vendor.Task(ctx, in.RemoteRef)
		switch {
		case errors.Is(err, paidvendor.ErrNotFound):
			return 0, nonRetryable(allot.InvalidRemoteRef, "the vendor has no task %q: check the reference in the vendor's console", in.RemoteRef)
		case err != nil:
			return 0, fmt.Errorf("look up vendor task %s: %w", in.RemoteRef, err)
		case vt.IdempotencyKey != "" && vt.IdempotencyKey != latest.IdempotencyKey:
			return 0, nonRetryable(allot.InvalidRemoteRef, "vendor task %s was submitted for another paid task (idempotency key %s, this one is %s): adopt the task of this step", vt.ID, vt.IdempotencyKey, latest.IdempotencyKey)
		}
		if _, err := a.recordSubmission(ctx, ref, vt); err != nil {
			return 0, err
		}
		countSubmission(ctx, p.Name, step.Name, SubmissionAdopted)
		countCost(ctx, p.Name, vt.Cost.Amount, vt.Cost.Currency)
	case allot.ActionResubmit:
		if !unknown && latest.State != allot.PaidPlanned {
			return 0, nonRetryable(allot.InvalidInput, "step %s revision %d is %s: only an unknown outcome can be resubmitted (use rework for a new revision)", step.Name, ref.Revision, latest.State)
		}
		if _, err := a.Ledger.ResetIntent(ctx, ref); err != nil {
			return 0, classify(err)
		}
	case allot.ActionAbandon:
		if in.Reason == "" {
			return 0, nonRetryable(allot.InvalidInput, "abandon needs a reason: pass --reason TEXT")
		}
		if !unknown && latest.State != allot.PaidAbandoned {
			return 0, nonRetryable(allot.InvalidInput, "step %s revision %d is %s: only an unknown outcome can be abandoned", step.Name, ref.Revision, latest.State)
		}
		if _, err := a.Ledger.Abandon(ctx, ref, in.Reason); err != nil {
			return 0, classify(err)
		}
	}
	return ref.Revision, nil
}

func approvalStep(p *pipeline.Pipeline) (pipeline.Step, bool) {
	for _, s := range p.Steps {
		if s.Kind == pipeline.Approval {
			return s, true
		}
	}
	return pipeline.Step{}, false
}

func firstAction(p *pipeline.Pipeline, action string) (int, bool) {
	for i, s := range p.Steps {
		if s.Kind == pipeline.Local && s.Action == action {
			return i, true
		}
	}
	return 0, false
}

func stepIndex(p *pipeline.Pipeline, name string) (int, bool) {
	for i, s := range p.Steps {
		if s.Name == name {
			return i, true
		}
	}
	return 0, false
}

// unpaidFrom names the local and approval steps from index i on: what a new
// paid result or a reassembly makes stale.
func unpaidFrom(p *pipeline.Pipeline, i int) []string {
	var names []string
	for _, s := range p.Steps[i:] {
		if s.Kind != pipeline.Paid {
			names = append(names, s.Name)
		}
	}
	return names
}
