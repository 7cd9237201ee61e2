package allot

import "time"

// PaidTaskRef names one paid task.
type PaidTaskRef struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	Revision  int    `json:"revision"` // 0 for the first submission of a step
}

// PaidTask is one paid task as stored.
type PaidTask struct {
	PaidTaskRef
	IdempotencyKey string        `json:"idempotency_key"`
	State          PaidTaskState `json:"state"`
	RemoteRef      string        `json:"remote_ref"`
	Artifact       string        `json:"artifact"`
	SHA256         string        `json:"sha256"`
	Error          string        `json:"error"`
	RequestID      string        `json:"request_id"` // the operator request (Temporal update ID) that planned this revision, if any
	// Owner is the attempt that wrote the intent; only it may send.
	Owner string `json:"owner,omitempty"`
	// MaybeSent: a send began whose answer never came; the vendor may
	// hold the task. Before anything is sent again it is asked.
	MaybeSent bool `json:"maybe_sent,omitempty"`
	// SendingUntil is the deadline of the latest send: until it has
	// passed, that send may still reach the vendor, and a look-up that
	// finds nothing proves nothing.
	SendingUntil time.Time `json:"sending_until,omitzero"`
	// ResubmitRequest is the operator request that allowed one send
	// without asking the vendor (resolve --resubmit); the send consumes it.
	ResubmitRequest string `json:"resubmit_request,omitempty"`
	// FirstSentAt is when the first send of the task began (zero: never
	// sent). The vendor's idempotency horizon counts from it, not from
	// CreatedAt: a task may wait on its budget long before it is sent
	// (docs/design.md, "Vendor controls", idempotency horizon).
	FirstSentAt time.Time `json:"first_sent_at,omitzero"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// OutcomeUnknown reports whether the task is an intent that may have reached
// the vendor: what an operator settles when the vendor cannot be asked.
func (t PaidTask) OutcomeUnknown() bool { return t.State == PaidIntent && t.MaybeSent }
