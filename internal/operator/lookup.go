package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
	"allot/workflows"
)

// LookupInput names the paid step whose task to look up at its vendor.
type LookupInput struct {
	Pipeline  string
	EpisodeID string
	Step      string
	// State is the Episode workflow's state when it was queried (nil
	// without Temporal): it says which step the episode is parked on. Without
	// it the ledger's recorded outcome stands in.
	State *workflows.EpisodeState
}

// LookupResult is what the vendor holds under the idempotency key of the
// step's latest paid task, and the command that moves the step on.
type LookupResult struct {
	Pipeline        string              `json:"pipeline"`
	EpisodeID       string              `json:"episode_id"`
	Step            string              `json:"step"`
	Revision        int                 `json:"revision"`
	IdempotencyKey  string              `json:"idempotency_key"`
	TaskState       allot.PaidTaskState `json:"task_state"`
	MaybeSent       bool                `json:"maybe_sent"`
	LookupSupported bool                `json:"lookup_supported"`
	Found           bool                `json:"found"`
	VendorTask      *VendorTask         `json:"vendor_task,omitempty"`
	// Attention is why the episode is parked on this step (an error type,
	// or allot.AttentionWaitingVendor; "" when it is not): with TaskState
	// it picks the commands allot.PaidCommandTable allows.
	Attention string `json:"attention,omitempty"`
	// Next is the command to run next, one the episode takes now: adopt
	// the found task; when the vendor has nothing, retry (or, past the
	// idempotency horizon, resubmit). "" when none fits.
	Next string `json:"next,omitempty"`
	// Note says what the answer means when it is not plain: the vendor
	// may have forgotten the key, or the step takes no command now.
	Note string `json:"note,omitempty"`
	// Unreachable says why the vendor was not asked from here: its
	// adapter lives in a worker (go, activity), not in the starter.
	Unreachable string `json:"unreachable,omitempty"`
}

// VendorTask is a vendor's task as the lookup found it.
type VendorTask struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	CostAmount     int64  `json:"cost_amount"`
	CostCurrency   string `json:"cost_currency"`
	SHA256         string `json:"sha256,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Lookup asks the vendor, by the idempotency key of the step's latest paid
// task, what it holds. It reads only: nothing is written to the ledger and
// nothing is sent to the vendor but the look-up. It is how an operator finds
// the reference to adopt for an episode parked with an unknown outcome.
//
// vendor is nil when the step's vendor cannot be reached from here (a go or
// activity adapter lives in a worker): the result then gives the key to ask
// the vendor by, and the commands to run with its answer.
func Lookup(ctx context.Context, led *ledger.Ledger, vendor paidvendor.Submitter, pipelines *pipeline.Set, in LookupInput) (LookupResult, error) {
	p, err := pipelines.Get(in.Pipeline)
	if err != nil {
		return LookupResult{}, err
	}
	st, ok := p.Step(in.Step)
	if !ok || !st.Kind.Remote() {
		return LookupResult{}, allot.Errorf(allot.StepNotFound, "pipeline %s has no paid or effect step %q: its paid steps are %v", p.Name, in.Step, p.PaidStepNames())
	}
	task, err := led.LatestPaidTask(ctx, p.Name, in.EpisodeID, in.Step)
	if err != nil {
		return LookupResult{}, err
	}
	out := LookupResult{
		Pipeline: p.Name, EpisodeID: in.EpisodeID, Step: in.Step, Revision: task.Revision,
		IdempotencyKey: task.IdempotencyKey, TaskState: task.State, MaybeSent: task.MaybeSent, LookupSupported: true,
	}
	if in.State != nil {
		out.Attention = stateAttention(*in.State, in.Step)
	} else if ep, err := led.Episode(ctx, p.Name, in.EpisodeID); err == nil {
		out.Attention = ledgerAttention(ep)
	} else {
		return LookupResult{}, err
	}
	answer := lookupNotFound
	var ref string
	switch {
	case task.IdempotencyKey == "":
		// planned: nothing was ever sent under this revision
	case vendor == nil:
		answer = lookupUnreachable
		v, _ := pipelines.Vendor(st.Vendor)
		out.LookupSupported = false
		out.Unreachable = fmt.Sprintf("step %s's vendor %s is reached through a %s adapter in the worker, not from here: ask it what it holds under idempotency key %s, then %s",
			in.Step, st.Vendor, v.Adapter, task.IdempotencyKey, unreachableThen(p.Name, in.EpisodeID, in.Step, task.State, out.Attention))
	default:
		vt, err := vendor.LookupByIdempotencyKey(ctx, task.IdempotencyKey)
		switch {
		case err == nil:
			answer, ref = lookupFound, vt.ID
			out.Found = true
			out.VendorTask = &VendorTask{ID: vt.ID, IdempotencyKey: vt.IdempotencyKey, Status: string(vt.Status),
				CostAmount: vt.Cost.Amount, CostCurrency: vt.Cost.Currency, SHA256: vt.SHA256, Error: vt.Error}
		case errors.Is(err, paidvendor.ErrNotFound):
		case errors.Is(err, paidvendor.ErrLookupUnsupported):
			answer = lookupUnsupported
			out.LookupSupported = false
		default:
			return LookupResult{}, fmt.Errorf("look up key %s at the vendor: %w", task.IdempotencyKey, err)
		}
	}
	out.Next = nextAfterLookup(p.Name, in.EpisodeID, in.Step, task.State, out.Attention, answer, ref)
	if answer == lookupNotFound && task.IdempotencyKey != "" && out.Attention == allot.IdempotencyHorizonPassed {
		out.Note = fmt.Sprintf("the vendor has no task under key %s, but the key is past the vendor's idempotency horizon: the vendor may have forgotten it, and the step may still have been sent. Check the vendor's console for this step's task: if it is there, run `%s` with its reference in place of REF; if not, the next command resends it",
			task.IdempotencyKey, allot.AdoptCommand(p.Name, in.EpisodeID, in.Step, "REF"))
	}
	if len(allot.PaidActionsAllowed(task.State, out.Attention)) == 0 {
		out.Note = fmt.Sprintf("step %s is %s and the episode is not parked on it: it takes no command now; see the episode with `%s`",
			in.Step, task.State, allot.ShowCommand(p.Name, in.EpisodeID))
	}
	return out, nil
}

// How a look-up by idempotency key was answered.
type lookupAnswer int

const (
	lookupFound       lookupAnswer = iota // the vendor holds a task under the key
	lookupNotFound                        // it holds none (or nothing was sent)
	lookupUnsupported                     // it cannot look tasks up by key
	lookupUnreachable                     // its adapter is in a worker: not asked
)

// nextAfterLookup is the command that moves the step on after the look-up's
// answer, chosen among the actions the command table allows the step's
// task state and attention, so that the episode takes it; "" if none fits.
// A found task is adopted. A vendor that holds nothing: retry (the
// protocol looks again before it sends), or where retry is not allowed
// (past the idempotency horizon) resubmit, or abandon as the last exit of
// a parked step. An unanswered look-up names no single command.
func nextAfterLookup(pipelineName, episodeID, step string, state allot.PaidTaskState, attention string, answer lookupAnswer, ref string) string {
	allowed := allot.PaidActionsAllowed(state, attention)
	switch answer {
	case lookupFound:
		if slices.Contains(allowed, allot.ActionAdopt) {
			return allot.AdoptCommand(pipelineName, episodeID, step, ref)
		}
	case lookupNotFound:
		return ifNothingCommand(pipelineName, episodeID, step, state, attention)
	}
	return ""
}

// ifNothingCommand is the command for a step whose vendor holds nothing
// under its key; "" if the step takes none.
func ifNothingCommand(pipelineName, episodeID, step string, state allot.PaidTaskState, attention string) string {
	if state != allot.PaidPlanned && state != allot.PaidIntent {
		return "" // submitted or settled: the vendor had it
	}
	allowed := allot.PaidActionsAllowed(state, attention)
	switch {
	case slices.Contains(allowed, allot.ActionRetry):
		return allot.RetryCommand(pipelineName, episodeID, step)
	case slices.Contains(allowed, allot.ActionResubmit):
		return allot.ResubmitCommand(pipelineName, episodeID, step)
	case slices.Contains(allowed, allot.ActionAbandon) && attention != allot.AttentionWaitingVendor:
		return allot.AbandonCommand(pipelineName, episodeID, step, "the vendor has no task for it after "+attention)
	}
	return ""
}

// unreachableThen says what to run with the answer of a vendor asked by
// hand: only commands the step takes now.
func unreachableThen(pipelineName, episodeID, step string, state allot.PaidTaskState, attention string) string {
	var then []string
	if slices.Contains(allot.PaidActionsAllowed(state, attention), allot.ActionAdopt) {
		then = append(then, fmt.Sprintf("run `%s` with its reference in place of REF", allot.AdoptCommand(pipelineName, episodeID, step, "REF")))
	}
	if c := ifNothingCommand(pipelineName, episodeID, step, state, attention); c != "" {
		then = append(then, fmt.Sprintf("`%s` if it has nothing", c))
	}
	if len(then) == 0 {
		return fmt.Sprintf("see the episode with `%s`: the step takes no command now", allot.ShowCommand(pipelineName, episodeID))
	}
	return strings.Join(then, ", or ")
}

// stateAttention is why the episode, in state st, is parked on step: the
// same attention its update validators check commands against.
func stateAttention(st workflows.EpisodeState, step string) string {
	switch {
	case st.Attention != nil && st.Attention.Step == step:
		return st.Attention.ErrorType
	case st.Waiting != nil && st.Waiting.Step == step:
		return allot.AttentionWaitingVendor
	}
	return ""
}

// ledgerAttention is the attention the ledger's last recorded outcome of
// the episode gives, without the workflow to ask.
func ledgerAttention(ep ledger.Episode) string {
	switch allot.Outcome(ep.Outcome) {
	case allot.OutcomeNeedsAttention:
		return ep.OutcomeReason
	case allot.OutcomeWaitingVendor:
		return allot.AttentionWaitingVendor
	}
	return ""
}
