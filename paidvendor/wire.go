package paidvendor

import (
	"fmt"

	"allot/paidvendor/vendorapi"
)

// taskFromWire converts and checks a task the vendor sent: a reply that does
// not follow the API is ErrBadResponse, never a Task with holes in it.
func taskFromWire(w vendorapi.Task) (Task, error) {
	if err := ValidateTaskID(w.ID); err != nil {
		return Task{}, fmt.Errorf("%w: task id: %w", ErrBadResponse, err)
	}
	status := Status(w.Status)
	if !status.Valid() {
		return Task{}, fmt.Errorf("%w: task %s has unknown status %s", ErrBadResponse, w.ID, quoteForError(w.Status))
	}
	if w.SHA256 != "" && !isSHA256Hex(w.SHA256) {
		return Task{}, fmt.Errorf("%w: task %s has a sha256 that is not 64 lowercase hex digits", ErrBadResponse, w.ID)
	}
	if status == StatusSucceeded && w.SHA256 == "" {
		return Task{}, fmt.Errorf("%w: task %s succeeded without a sha256", ErrBadResponse, w.ID)
	}
	t := Task{
		ID:             w.ID,
		IdempotencyKey: w.IdempotencyKey,
		Kind:           w.Kind,
		Status:         status,
		SHA256:         w.SHA256,
		Error:          w.Error,
	}
	if w.Cost != nil {
		if w.Cost.Amount < 0 {
			return Task{}, fmt.Errorf("%w: task %s has a negative cost", ErrBadResponse, w.ID)
		}
		t.Cost = Cost{Amount: w.Cost.Amount, Currency: w.Cost.Currency}
	}
	return t, nil
}

// chargeFromWire converts and checks one entry of the vendor's bill.
func chargeFromWire(w vendorapi.Charge) (Charge, error) {
	if err := ValidateTaskID(w.TaskID); err != nil {
		return Charge{}, fmt.Errorf("%w: charge task_id: %w", ErrBadResponse, err)
	}
	return Charge{TaskID: w.TaskID, IdempotencyKey: w.IdempotencyKey, Amount: w.Amount, Currency: w.Currency, At: w.At}, nil
}
