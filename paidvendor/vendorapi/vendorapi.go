// Package vendorapi is the paid vendor's HTTP API as both sides see it: the
// paths, headers and JSON bodies that the client (package paidvendor) sends
// and reads and that the simulated vendor (package paidvendortest) serves.
// Keeping them in one place means the client and the simulator cannot drift
// apart: a field renamed here is renamed for both.
//
// The API, in short (every request carries "Authorization: Bearer <key>"):
//
//	POST /v1/tasks                        SubmitRequest, header Idempotency-Key -> 201 Task (new) or 200 Task (same key again)
//	GET  /v1/tasks?idempotency_key=KEY    -> 200 Task, 404, or 501 when the vendor cannot look up by key
//	GET  /v1/tasks/{id}                   -> 200 Task, 404
//	GET  /v1/tasks/{id}/result            -> 200 result bytes (their sha256 is Task.SHA256), 409 while unfinished or failed
//	GET  /v1/charges?after=CURSOR&limit=N -> 200 ChargesPage: the bill's lines after CURSOR, oldest first; 400 for a bad cursor or limit
//	GET  /v1/stats                        -> 200 Stats: what the vendor saw (the simulator; tests assert limits with it)
//	GET  /v1/bill-faults                  -> 200 BillFaults: the bill faults the simulator planted, for a checker
//
// and the batch API, described in batch.go.
//
// Errors are an ErrorBody with one of the Code constants. The client
// classifies answers by HTTP status, not by code: codes are for people
// reading logs and for the simulator's tests.
//
// The package holds data shapes only, no behaviour, so that importing it
// costs nothing.
package vendorapi

import "time"

// Paths of the API, relative to the vendor's base URL.
const (
	TasksPath   = "/v1/tasks"
	ChargesPath = "/v1/charges"
	StatsPath   = "/v1/stats"
	// BillFaultsPath is the simulator's own: no real vendor lists the
	// mistakes in its bill.
	BillFaultsPath = "/v1/bill-faults"
)

// Query parameters of the charges endpoint. The cursor is opaque to a
// client: it sends back the NextCursor it was given, nothing it made up.
const (
	AfterParam = "after"
	LimitParam = "limit"
)

// Page sizes of the charges endpoint: a limit of 0 or none is
// DefaultChargesLimit; a larger limit than MaxChargesLimit is served as
// MaxChargesLimit, not refused, so a client asking for much gets pages.
const (
	DefaultChargesLimit = 1000
	MaxChargesLimit     = 1000
)

// ChargeIDPrefix starts every line ID of the simulated vendor's bill
// ("ch_" and a decimal sequence number). Other vendors have IDs of their
// own: a client treats a line ID as an opaque string.
const ChargeIDPrefix = "ch_"

// TaskPath is the path of one task.
func TaskPath(id string) string { return TasksPath + "/" + id }

// ResultPath is the path of one task's result bytes.
func ResultPath(id string) string { return TaskPath(id) + "/result" }

// IdempotencyKeyHeader carries a submission's idempotency key;
// IdempotencyKeyParam is the lookup's query parameter for the same key.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	IdempotencyKeyParam  = "idempotency_key"
)

// TaskIDPrefix starts every task ID ("vt_" and lowercase hex digits).
const TaskIDPrefix = "vt_"

// Task states as they appear in Task.Status. Queued and running are in
// progress; succeeded and failed are terminal.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// SubmitRequest is the body of POST /v1/tasks.
type SubmitRequest struct {
	Kind   string            `json:"kind"`
	Params map[string]string `json:"params"`
}

// Cost is an amount in minor units (cents for USD) and its ISO 4217 currency.
type Cost struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Task is a task as the vendor reports it.
type Task struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Kind           string `json:"kind,omitempty"`
	Status         string `json:"status"`
	SHA256         string `json:"sha256,omitempty"` // lowercase hex of the result, once succeeded
	Cost           *Cost  `json:"cost,omitempty"`
	Error          string `json:"error,omitempty"` // why it failed, once failed
}

// Charge is one line of the vendor's bill.
type Charge struct {
	// ID names the line, unique within the vendor and never changed: a
	// reconciler keys what it found on it, once per line.
	ID             string `json:"id"`
	TaskID         string `json:"task_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// Amount is positive for a refund too: Refund says which way it goes.
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	At       time.Time `json:"at"`
	// Refund marks money given back for the task, not charged.
	Refund bool `json:"refund,omitempty"`
}

// ChargesPage is one page of the bill (GET /v1/charges).
type ChargesPage struct {
	Charges []Charge `json:"charges"`
	// NextCursor is the cursor after the last line given; with no lines,
	// the cursor asked with, so a reader keeps its place.
	NextCursor string `json:"next_cursor"`
	// HasMore says that lines after NextCursor exist already.
	HasMore bool `json:"has_more"`
	// Account is the vendor's ID of the account the key bills to; a
	// vendor that names none leaves it out.
	Account string `json:"account,omitempty"`
}

// Kinds of bill faults the simulator plants (BillFault.Kind).
const (
	BillFaultPhantom     = "phantom"      // a line for a task and key that never existed
	BillFaultMissing     = "missing"      // a task billed nothing: its line is not on the bill
	BillFaultWrongAmount = "wrong_amount" // the line bills another amount than the task's cost
	BillFaultDouble      = "double"       // a second line for the same task and key
	BillFaultRefund      = "refund"       // a refund line for the task
)

// BillFault is one fault planted in the simulated bill: what a
// reconciler must find, and nothing else.
type BillFault struct {
	Kind           string `json:"kind"`
	TaskID         string `json:"task_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// LineID is the line that shows the fault: the phantom, the wrongly
	// billed, the second or the refund line; for a missing charge, the
	// line that was taken off the bill.
	LineID string `json:"line_id"`
}

// BillFaults is the answer of GET /v1/bill-faults, in the order planted.
type BillFaults struct {
	Faults []BillFault `json:"faults"`
}

// Stats is what a vendor saw of its clients' requests (not counting
// /v1/stats and /v1/charges), so that tests assert allot's shared limits
// from the vendor's side.
type Stats struct {
	// MaxInFlight is the most requests it served at once; InFlight how
	// many it serves now.
	MaxInFlight int `json:"max_in_flight"`
	InFlight    int `json:"in_flight"`
	// Requests counts every request; Submissions the POSTs of tasks
	// among them.
	Requests    int64 `json:"requests"`
	Submissions int64 `json:"submissions"`
	// MaxSubmissionsPerSecond is the most submissions that arrived within
	// any one second.
	MaxSubmissionsPerSecond int `json:"max_submissions_per_second"`
	// Batches counts the POSTs of batches (the batch API).
	Batches int64 `json:"batches"`
}

// ErrorBody is the body of every non-2xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable Code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes, with the HTTP status they come with. A 429 or 5xx means "try
// again later" and carries a code of the vendor's own.
const (
	CodeUnauthorized          = "unauthorized"            // 401: missing or wrong API key
	CodeMissingIdempotencyKey = "missing_idempotency_key" // 400
	CodeBadJSON               = "bad_json"                // 400: the body is not a SubmitRequest
	CodeMissingKind           = "missing_kind"            // 400
	CodeBadTaskID             = "bad_task_id"             // 400: not a task ID of this vendor
	CodeBadCursor             = "bad_cursor"              // 400: not a cursor this vendor gave out
	CodeBadLimit              = "bad_limit"               // 400: the page limit is not a positive number
	CodeNotFound              = "not_found"               // 404
	CodeIdempotencyConflict   = "idempotency_conflict"    // 409: the key was used for a different request
	CodeNotFinished           = "not_finished"            // 409: the task has no result yet
	CodeTaskFailed            = "task_failed"             // 409: the task failed and has no result
	CodeLookupUnsupported     = "lookup_unsupported"      // 501: no lookup by idempotency key
)
