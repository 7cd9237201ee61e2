package paidvendor

import (
	"fmt"
	"strings"

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

// chargeFromWire converts and checks one line of the vendor's bill. The
// line ID is the vendor's and opaque, but a reconciler keys drift on it:
// it must be there, and printable.
func chargeFromWire(w vendorapi.Charge) (Charge, error) {
	switch {
	case w.ID == "":
		return Charge{}, fmt.Errorf("%w: a charge of task %s has no line id", ErrBadResponse, quoteForError(w.TaskID))
	case len(w.ID) > maxChargeIDLen:
		return Charge{}, fmt.Errorf("%w: charge line id %s is over %d bytes", ErrBadResponse, quoteForError(w.ID), maxChargeIDLen)
	case strings.IndexFunc(w.ID, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0:
		return Charge{}, fmt.Errorf("%w: charge line id %s has a space, control or non-ASCII character", ErrBadResponse, quoteForError(w.ID))
	}
	if err := ValidateTaskID(w.TaskID); err != nil {
		return Charge{}, fmt.Errorf("%w: charge %s: task_id: %w", ErrBadResponse, w.ID, err)
	}
	if w.Amount < 0 {
		// A negative line could be a refund or a mistake; the API says
		// refunds with the flag, so the reader never has to guess.
		return Charge{}, fmt.Errorf("%w: charge %s has a negative amount (a refund is a positive amount with refund set)", ErrBadResponse, w.ID)
	}
	return Charge{ID: w.ID, TaskID: w.TaskID, IdempotencyKey: w.IdempotencyKey, Amount: w.Amount, Currency: w.Currency, At: w.At, Refund: w.Refund}, nil
}

// maxChargeIDLen bounds a bill line's ID, which the ledger keeps.
const maxChargeIDLen = 200
