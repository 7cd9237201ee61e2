package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"allot"
	"allot/internal/ledger"
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
	By        string       `json:"by,omitempty"` // who sent the command; "" for automatic approvals
	// Verified is the vendor's task for RemoteRef as the vendor's own
	// status activity reported it (activity adapters); nil: ApplyDecision
	// asks the vendor itself.
	Verified *paidvendor.Task `json:"verified,omitempty"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// DecisionResult is the episode's steps after the decision took effect.
type DecisionResult struct {
	Action   allot.Action `json:"action"`
	Step     string       `json:"step,omitempty"`
	Revision int          `json:"revision"`
	Steps    []StepState  `json:"steps"`
}

// ApplyDecision applies an operator decision through the ledger, which
// checks it against the paid task's state, applies its effect and records it
// with its reason in one transaction. It is idempotent per request: a
// request the ledger already recorded (an attempt that committed and then
// lost its answer) returns the first result. Nothing here allocates; a
// missing episode is EpisodeNotFound before anything else. Every refusal is
// a non-retryable, typed error and leaves the ledger as it was.
func (a *Activities) ApplyDecision(ctx context.Context, in DecisionInput) (DecisionResult, error) {
	p, ep, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, LedgerID: in.LedgerID})
	if err != nil {
		return DecisionResult{}, err
	}
	if in.RequestID == "" {
		return DecisionResult{}, nonRetryable(allot.InvalidInput, "decision %q on %s/%s has no request ID", in.Action, p.Name, ep.ID)
	}
	if done, ok, err := a.Ledger.Decision(ctx, p.Name, ep.ID, in.RequestID); err != nil {
		return DecisionResult{}, classify(err)
	} else if ok {
		return a.decisionResult(ctx, p, ep, done)
	}
	req := ledger.DecisionRequest{OperatorDecision: ledger.OperatorDecision{
		RequestID: in.RequestID, Pipeline: p.Name, EpisodeID: ep.ID, Step: in.Step,
		Action: in.Action, RemoteRef: in.RemoteRef, Reason: in.Reason, By: in.By,
	}}
	switch in.Action {
	case allot.ActionApprove, allot.ActionReject:
		step, ok := approvalStep(p)
		if !ok {
			return DecisionResult{}, nonRetryable(allot.StepNotFound, "pipeline %q has no approval step: nothing to %s", p.Name, in.Action)
		}
		req.Step = step.Name
	case allot.ActionReassemble:
		i, ok := firstAction(p, pipeline.ActionAssemble)
		if !ok {
			return DecisionResult{}, nonRetryable(allot.StepNotFound, "pipeline %q has no assemble step", p.Name)
		}
		req.Step, req.Reset = "", unpaidFrom(p, i)
	case allot.ActionRework, allot.ActionAdopt, allot.ActionResubmit, allot.ActionAbandon, allot.ActionRetry:
		step, ok := p.Step(in.Step)
		if ok && step.Kind.Free() && (in.Action == allot.ActionRetry || in.Action == allot.ActionAbandon) {
			// A go, exec or activity step parked with StepFailure.
			req.Unpaid = true
			break
		}
		if !ok || !step.Kind.Remote() {
			return DecisionResult{}, nonRetryable(allot.StepNotFound, "pipeline %q has no paid step %q: its paid steps are %v", p.Name, in.Step, p.PaidStepNames())
		}
		switch in.Action {
		case allot.ActionRework:
			i, _ := stepIndex(p, step.Name)
			req.Reset = unpaidFrom(p, i+1)
		case allot.ActionAdopt:
			if req.Adopted, err = a.verifyAdoption(ctx, p, ep, step, in.RemoteRef, in.Verified); err != nil {
				return DecisionResult{}, err
			}
		case allot.ActionAbandon:
			if in.Reason == "" {
				return DecisionResult{}, nonRetryable(allot.InvalidInput, "abandon needs a reason: pass --reason TEXT")
			}
		}
	default:
		return DecisionResult{}, nonRetryable(allot.InvalidInput, "unknown decision %q: use one of %v", in.Action, allot.Actions)
	}
	if in.Action == allot.ActionAbandon && !req.Unpaid {
		if err := a.planBeforeAbandon(ctx, p, ep, in.Step); err != nil {
			return DecisionResult{}, err
		}
	}
	done, applied, err := a.Ledger.Decide(ctx, req)
	if err != nil {
		return DecisionResult{}, classify(err)
	}
	if applied && in.Action == allot.ActionAdopt {
		countSubmission(ctx, p.Name, in.Step, SubmissionAdopted)
		countCost(ctx, p.Name, req.Adopted.Amount, req.Adopted.Currency)
		if st, ok := p.Step(in.Step); ok {
			a.budgetAlerts(ctx, p, ep, st)
		}
	}
	return a.decisionResult(ctx, p, ep, done)
}

// planBeforeAbandon writes the planned task of a paid step that has none:
// a step that waited for its vendor before its intent was written (a pause
// from the start) is abandoned as a planned task, with nothing reserved.
func (a *Activities) planBeforeAbandon(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, step string) error {
	_, err := a.Ledger.LatestPaidTask(ctx, p.Name, ep.ID, step)
	if !errors.Is(err, ledger.ErrPaidTaskNotFound) {
		return classify(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: step}
	_, err = a.Ledger.WritePlanned(ctx, ref, allot.IdempotencyKey(p.Name, ep.ID, step, 0))
	return classify(err)
}

func (a *Activities) decisionResult(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, d ledger.OperatorDecision) (DecisionResult, error) {
	loaded, err := a.LoadEpisode(ctx, EpisodeRef{Pipeline: p.Name, EpisodeID: ep.ID})
	if err != nil {
		return DecisionResult{}, err
	}
	return DecisionResult{Action: d.Action, Step: d.Step, Revision: d.Revision, Steps: loaded.Steps}, nil
}

// verifyAdoption asks the vendor for the task an operator wants to adopt and
// refuses it unless it carries this step's idempotency key: a reference that
// belongs to another task, or to no known key, is never booked to this one.
func (a *Activities) verifyAdoption(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, step pipeline.Step, remoteRef string, verified *paidvendor.Task) (ledger.Submission, error) {
	if remoteRef == "" || len(remoteRef) > 200 || strings.IndexFunc(remoteRef, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return ledger.Submission{}, nonRetryable(allot.InvalidRemoteRef, "reference %q is not a vendor's task reference: find this step's with `%s`", remoteRef, allot.LookupCommand(p.Name, ep.ID, step.Name))
	}
	latest, err := a.Ledger.LatestPaidTask(ctx, p.Name, ep.ID, step.Name)
	if err != nil {
		return ledger.Submission{}, classify(err)
	}
	var vt paidvendor.Task
	switch {
	case verified != nil:
		// The Episode asked the vendor's own activity (an activity adapter).
		vt = *verified
		if vt.ID != remoteRef {
			err = paidvendor.ErrNotFound
		}
	default:
		vendor, verr := a.vendorFor(ctx, step.Vendor)
		if verr != nil {
			return ledger.Submission{}, verr
		}
		vt, err = withHeartbeat(ctx, func(ctx context.Context) (paidvendor.Task, error) {
			if c, ok := vendor.(paidvendor.Client); ok {
				return c.Task(ctx, remoteRef)
			}
			// An effect's adapter only looks up by key: the reference must
			// be what it has under this task's key.
			t, err := vendor.LookupByIdempotencyKey(ctx, latest.IdempotencyKey)
			if err == nil && t.ID != remoteRef {
				err = paidvendor.ErrNotFound
			}
			return t, err
		})
	}
	switch {
	case errors.Is(err, paidvendor.ErrLookupUnsupported):
		return ledger.Submission{}, nonRetryable(allot.InvalidRemoteRef, "the downstream of step %s cannot say what it holds, so reference %q cannot be checked: resubmit or abandon the step", step.Name, remoteRef)
	case errors.Is(err, paidvendor.ErrNotFound) || errors.Is(err, paidvendor.ErrInvalidTaskID):
		return ledger.Submission{}, nonRetryable(allot.InvalidRemoteRef, "the vendor has no task %q: find this step's task with `%s`", remoteRef, allot.LookupCommand(p.Name, ep.ID, step.Name))
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return ledger.Submission{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key: %v", err)
	case err != nil:
		return ledger.Submission{}, fmt.Errorf("look up vendor task %s: %w", remoteRef, err)
	case vt.IdempotencyKey != latest.IdempotencyKey:
		owner := "no idempotency key"
		if vt.IdempotencyKey != "" {
			owner = "idempotency key " + vt.IdempotencyKey
		}
		return ledger.Submission{}, nonRetryable(allot.InvalidRemoteRef, "vendor task %s carries %s, but step %s revision %d of episode %s has key %s: it is not this task's; nothing was adopted",
			vt.ID, owner, step.Name, latest.Revision, ep.ID, latest.IdempotencyKey)
	}
	return ledger.Submission{RemoteRef: vt.ID, Amount: vt.Cost.Amount, Currency: vt.Cost.Currency}, nil
}

func approvalStep(p *pipeline.Pipeline) (pipeline.Step, bool) {
	for _, s := range p.Steps {
		if s.Kind.Gate() {
			return s, true
		}
	}
	return pipeline.Step{}, false
}

func firstAction(p *pipeline.Pipeline, action string) (int, bool) {
	for i, s := range p.Steps {
		if s.Kind == allot.KindLocal && s.Action == action {
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
		if !s.Kind.Costs() {
			names = append(names, s.Name)
		}
	}
	return names
}
