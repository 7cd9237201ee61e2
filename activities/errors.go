package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
)

// classify turns allot's errors into Temporal errors at the activity
// boundary: a typed refusal (an allot.Error: the ledger's, the pipeline
// set's) becomes a non-retryable application error of the same type, so a
// refused command returns at once instead of retrying forever; anything
// else (I/O, a busy database, another attempt owning an intent) stays
// retryable.
func classify(err error) error {
	var refused *allot.Error
	if !errors.As(err, &refused) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), refused.Type, nil)
}

// waitCategory marks the errors of expected waits, which are not failures:
// a vendor that takes no request now (VendorWaiting), an earlier send's
// deadline (SendInFlight), a budget with no room (BudgetExhausted). The SDK
// logs a benign error at debug, not as an activity ERROR, and does not
// count it as a failed activity; allot's own metrics count the waits
// (docs/design.md, "Vendor controls"). The workflow matches error types,
// never the category.
const waitCategory = temporal.ApplicationErrorCategoryBenign

func nonRetryable(errType string, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil)
}

// checkLedger refuses work that belongs to another ledger: two ledgers on
// one namespace and task queue would otherwise act on each other's
// episodes, or leave them allocated forever. "" (a workflow started before
// ledgers had an identity, or by hand without one) is accepted.
func (a *Activities) checkLedger(id string) error {
	if id == "" || id == a.Ledger.ID() {
		return nil
	}
	return nonRetryable(allot.LedgerMismatch, "this work belongs to ledger %s, but this worker's ledger is %s: two ledgers serve one namespace and task queue; give each ledger its own task queue (ALLOT_TASK_QUEUE) or namespace, or point this worker at ledger %s",
		id, a.Ledger.ID(), id)
}

// ParkDetails ride on the error that parks an episode: the paid task's
// state in the ledger when the activity failed, so that the Episode shows,
// and its command table uses, the state the ledger has rather than a guess.
type ParkDetails struct {
	TaskState allot.PaidTaskState `json:"task_state"`
	// Budgets are, for BudgetExhausted, the budgets that refused the task
	// and what each has: the episode shows them, names the raise that
	// admits the task, and asks again until one does.
	Budgets []ledger.BudgetShortfall `json:"budgets,omitempty"`
}

// withTaskState gives a non-retryable error of a paid activity the task's
// state as the ledger has it now (ParkDetails). Other errors pass as they
// are, and so does one the ledger cannot be read for.
func (a *Activities) withTaskState(ctx context.Context, ref ledger.PaidTaskRef, err error) error {
	var appErr *temporal.ApplicationError
	if err == nil || !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.HasDetails() {
		return err
	}
	t, rerr := a.Ledger.PaidTask(ctx, ref)
	if rerr != nil {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(appErr.Message(), appErr.Type(), temporal.ApplicationErrorOptions{
		NonRetryable: true, Cause: appErr.Unwrap(), Category: appErr.Category(), Details: []any{ParkDetails{TaskState: t.State}}})
}
