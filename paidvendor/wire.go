package paidvendor

import (
	"fmt"
	"time"
)

// JSON shapes of the vendor API, shared by the client and the simulator.

type wireSubmit struct {
	Kind   string            `json:"kind"`
	Params map[string]string `json:"params"`
}

type wireCost struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type wireTask struct {
	ID             string    `json:"id"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Kind           string    `json:"kind,omitempty"`
	Status         Status    `json:"status"`
	SHA256         string    `json:"sha256,omitempty"`
	Cost           *wireCost `json:"cost,omitempty"`
	Error          string    `json:"error,omitempty"`
}

type wireCharge struct {
	TaskID         string    `json:"task_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	At             time.Time `json:"at"`
}

type wireErrorBody struct {
	Error wireErrorDetail `json:"error"`
}

type wireErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// task converts and checks a task the vendor sent.
func (w wireTask) task() (Task, error) {
	if err := ValidateTaskID(w.ID); err != nil {
		return Task{}, fmt.Errorf("%w: task id: %w", ErrBadResponse, err)
	}
	if !w.Status.Valid() {
		return Task{}, fmt.Errorf("%w: task %s has unknown status %s", ErrBadResponse, w.ID, quoteForError(string(w.Status)))
	}
	if w.SHA256 != "" && !isSHA256Hex(w.SHA256) {
		return Task{}, fmt.Errorf("%w: task %s has a sha256 that is not 64 lowercase hex digits", ErrBadResponse, w.ID)
	}
	if w.Status == StatusSucceeded && w.SHA256 == "" {
		return Task{}, fmt.Errorf("%w: task %s succeeded without a sha256", ErrBadResponse, w.ID)
	}
	t := Task{
		ID:             w.ID,
		IdempotencyKey: w.IdempotencyKey,
		Kind:           w.Kind,
		Status:         w.Status,
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

func (w wireCharge) charge() (Charge, error) {
	if err := ValidateTaskID(w.TaskID); err != nil {
		return Charge{}, fmt.Errorf("%w: charge task_id: %w", ErrBadResponse, err)
	}
	return Charge{TaskID: w.TaskID, IdempotencyKey: w.IdempotencyKey, Amount: w.Amount, Currency: w.Currency, At: w.At}, nil
}
