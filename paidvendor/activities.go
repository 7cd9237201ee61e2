package paidvendor

import "fmt"

// The activity adapter: a vendor reached through activities that a worker
// in any language implements on the vendor's task queue, named in the
// pipeline file ([[vendor]] adapter = "activity"). allot keeps the protocol
// around them; they only make the calls. Their arguments and results are
// these JSON shapes (the same fields as the vendor HTTP API's), and their
// failures are application errors whose type is one of the ActivityErr*
// names; any other failure of submit means "outcome unknown".
//
//	submit(ActivitySubmitRequest) -> ActivityTask        required
//	lookup(ActivityLookupRequest) -> ActivityTask        optional; without it an unknown outcome parks
//	status(ActivityTaskRequest)   -> ActivityTask        paid steps
//	fetch(ActivityTaskRequest)    -> ActivityFetchResult paid steps
//	quote(ActivitySubmitRequest)  -> Cost                optional: the price before sending, which a
//	                                                     budget reserves instead of the step's max_cost
//
// allot never retries a submit activity by itself (at most one attempt per
// send): a retry goes through the look-up, as for every adapter.

// ActivitySubmitRequest asks the vendor to start one task.
type ActivitySubmitRequest struct {
	IdempotencyKey string            `json:"idempotency_key"`
	Kind           string            `json:"kind"`
	Params         map[string]string `json:"params,omitempty"`
}

// ActivityLookupRequest asks what the vendor holds under a key.
type ActivityLookupRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
}

// ActivityTaskRequest names a vendor task by its reference.
type ActivityTaskRequest struct {
	ID string `json:"id"`
}

// ActivityTask is a vendor task as the adapter's activities report it.
type ActivityTask struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Kind           string `json:"kind,omitempty"`
	Status         Status `json:"status"`
	SHA256         string `json:"sha256,omitempty"`
	Cost           *Cost  `json:"cost,omitempty"`
	Error          string `json:"error,omitempty"`
}

// ActivityFetchResult is a succeeded task's result: its bytes (at most a
// few MiB: they travel through the workflow's history) or a URL allot
// downloads them from. Either way their sha256 must be the task's.
type ActivityFetchResult struct {
	Data []byte `json:"data,omitempty"`
	URL  string `json:"url,omitempty"`
}

// Error types an adapter's activities return (temporal application error
// types).
const (
	ActivityErrNotFound          = "NotFound"          // lookup, status: no such task
	ActivityErrLookupUnsupported = "LookupUnsupported" // lookup: the vendor cannot tell
	ActivityErrRefused           = "Refused"           // submit: definitely not accepted
	ActivityErrUnauthorized      = "Unauthorized"      // any: the credentials were refused
)

// Task checks the reported task and converts it.
func (t ActivityTask) Task() (Task, error) {
	if t.ID == "" {
		return Task{}, fmt.Errorf("%w: the adapter reported a task without an id", ErrBadResponse)
	}
	if !t.Status.Valid() {
		return Task{}, fmt.Errorf("%w: task %s has unknown status %q", ErrBadResponse, t.ID, t.Status)
	}
	if t.Status == StatusSucceeded && !isSHA256Hex(t.SHA256) {
		return Task{}, fmt.Errorf("%w: task %s succeeded without a sha256 of 64 lowercase hex digits", ErrBadResponse, t.ID)
	}
	out := Task{ID: t.ID, IdempotencyKey: t.IdempotencyKey, Kind: t.Kind, Status: t.Status, SHA256: t.SHA256, Error: t.Error}
	if t.Cost != nil {
		if t.Cost.Amount < 0 {
			return Task{}, fmt.Errorf("%w: task %s has a negative cost", ErrBadResponse, t.ID)
		}
		out.Cost = *t.Cost
	}
	return out, nil
}

// ActivityTaskOf is the JSON shape of a task, for an adapter written in Go.
func ActivityTaskOf(t Task) ActivityTask {
	cost := t.Cost
	return ActivityTask{ID: t.ID, IdempotencyKey: t.IdempotencyKey, Kind: t.Kind, Status: t.Status, SHA256: t.SHA256, Cost: &cost, Error: t.Error}
}
