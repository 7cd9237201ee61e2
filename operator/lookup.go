package operator

import (
	"context"
	"errors"
	"fmt"

	"allot"
	"allot/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// LookupInput names the paid step whose task to look up at its vendor.
type LookupInput struct {
	Pipeline  string
	EpisodeID string
	Step      string
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
	// Next is the command to run next: adopt the found task, or retry.
	Next string `json:"next,omitempty"`
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
		return LookupResult{}, fmt.Errorf("pipeline %s has no paid or effect step %q: its paid steps are %v", p.Name, in.Step, p.PaidStepNames())
	}
	task, err := led.LatestPaidTask(ctx, p.Name, in.EpisodeID, in.Step)
	if err != nil {
		return LookupResult{}, err
	}
	out := LookupResult{
		Pipeline: p.Name, EpisodeID: in.EpisodeID, Step: in.Step, Revision: task.Revision,
		IdempotencyKey: task.IdempotencyKey, TaskState: task.State, MaybeSent: task.MaybeSent, LookupSupported: true,
	}
	if task.IdempotencyKey == "" {
		out.Next = allot.RetryCommand(p.Name, in.EpisodeID, in.Step)
		return out, nil // planned: nothing was ever sent under this revision
	}
	if vendor == nil {
		v, _ := pipelines.Vendor(st.Vendor)
		out.LookupSupported = false
		out.Unreachable = fmt.Sprintf("step %s's vendor %s is reached through a %s adapter in the worker, not from here: ask it what it holds under idempotency key %s, then run `%s` with its reference in place of REF, or `%s` if it has nothing",
			in.Step, st.Vendor, v.Adapter, task.IdempotencyKey, allot.AdoptCommand(p.Name, in.EpisodeID, in.Step, "REF"), allot.RetryCommand(p.Name, in.EpisodeID, in.Step))
		return out, nil
	}
	vt, err := vendor.LookupByIdempotencyKey(ctx, task.IdempotencyKey)
	switch {
	case err == nil:
		out.Found = true
		out.VendorTask = &VendorTask{ID: vt.ID, IdempotencyKey: vt.IdempotencyKey, Status: string(vt.Status),
			CostAmount: vt.Cost.Amount, CostCurrency: vt.Cost.Currency, SHA256: vt.SHA256, Error: vt.Error}
		if task.State == allot.PaidIntent {
			out.Next = allot.AdoptCommand(p.Name, in.EpisodeID, in.Step, vt.ID)
		}
	case errors.Is(err, paidvendor.ErrNotFound):
		if task.State == allot.PaidIntent || task.State == allot.PaidPlanned {
			out.Next = allot.RetryCommand(p.Name, in.EpisodeID, in.Step)
		}
	case errors.Is(err, paidvendor.ErrLookupUnsupported):
		out.LookupSupported = false
	default:
		return LookupResult{}, fmt.Errorf("look up key %s at the vendor: %w", task.IdempotencyKey, err)
	}
	return out, nil
}
