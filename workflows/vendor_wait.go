package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// WaitingVendor says that a step waits for its vendor (docs/design.md,
// "Vendor controls"): paused by an operator, its breaker open, or its
// shared limits taken. The step goes on by itself.
type WaitingVendor struct {
	Step    string    `json:"step"`
	Vendor  string    `json:"vendor"`
	Reason  string    `json:"reason"` // allot.ReasonVendor*
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// vendorWaitAttempts is how many times Temporal retries an activity that
// waits for its vendor before the workflow hears of it again: each retry
// is after the delay the gate asked for (seconds while paused), and none
// adds to the history, so a long pause costs a few events an hour.
const vendorWaitAttempts = 100

// waitForVendor shows that step waits for its vendor (stage waiting_vendor,
// the reason, AllotOutcome, the current details and the ledger) and runs the
// activity again under a retry policy that keeps asking the gate, with the
// delay it gives, until the vendor takes the request; then the episode
// runs on. It returns the activity's first error that is not a wait (or
// nil), for call to handle as any other.
func (e *episode) waitForVendor(ctx workflow.Context, step string, opts workflow.ActivityOptions, activity, in, out any, err error) error {
	policy := *opts.RetryPolicy
	policy.MaximumAttempts = vendorWaitAttempts
	policy.NonRetryableErrorTypes = slices.DeleteFunc(slices.Clone(policy.NonRetryableErrorTypes), func(t string) bool { return t == allot.VendorWaiting })
	opts.RetryPolicy = &policy
	wctx := workflow.WithActivityOptions(ctx, opts)
	for errorType(err) == allot.VendorWaiting {
		if serr := e.showVendorWait(ctx, step, err); serr != nil {
			return serr
		}
		err = workflow.ExecuteActivity(wctx, activity, in).Get(ctx, out)
	}
	e.state.Waiting = nil
	if e.state.Stage == allot.StageWaitingVendor {
		if serr := e.setStage(ctx, allot.StageRunning); serr != nil && err == nil {
			return serr
		}
	}
	return err
}

// showVendorWait puts the wait where operators look; a wait for another
// reason (a pause that became a trip) is recorded again.
func (e *episode) showVendorWait(ctx workflow.Context, step string, err error) error {
	var w activities.VendorWait
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&w)
	}
	if w.Reason == "" {
		w.Reason, w.Message = allot.ReasonVendorBusy, rootMessage(err)
	}
	prev := e.state.Waiting
	if prev != nil && prev.Reason == w.Reason && prev.Vendor == w.Vendor && prev.Step == step {
		return nil
	}
	e.state.Retrying = nil
	e.state.Waiting = &WaitingVendor{Step: step, Vendor: w.Vendor, Reason: w.Reason, Message: w.Message, Since: workflow.Now(ctx)}
	how := "It goes on by itself when the vendor takes requests again."
	switch w.Reason {
	case allot.ReasonVendorPaused:
		how = fmt.Sprintf("It goes on by itself after `starter vendor resume %s`; `starter vendor list` shows every vendor.", w.Vendor)
	case allot.ReasonVendorTripped:
		how = fmt.Sprintf("One probe goes after the vendor's cool_down, and the step goes on when it is answered; `starter vendor resume %s` closes the breaker at once.", w.Vendor)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**Waiting for vendor %s** (%s) at step **%s**: %s\n\n%s", w.Vendor, w.Reason, step, w.Message, how))
	if e.state.Stage == allot.StageWaitingVendor {
		// Another reason at the same stage: the ledger keeps the latest.
		return e.recordOutcome(ctx, allot.OutcomeWaitingVendor, w.Reason)
	}
	return e.setStage(ctx, allot.StageWaitingVendor, w.Reason)
}
