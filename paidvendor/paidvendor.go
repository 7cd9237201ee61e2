// Package paidvendor is the paid-vendor layer: what a vendor adapter
// implements (Submitter for an effect's downstream, Client for a paid
// vendor whose tasks run and give a result, built by a Factory or
// ClientFactory from an API key), allot's HTTP implementation of Client
// (HTTPClient), an activity adapter over a Client for a vendor's own
// worker (ActivityAdapter, RegisterActivities, with the request and result
// shapes every activity adapter speaks), where API keys come from
// (CredentialsSource), and the optional BillReader through which allot
// reads a vendor's bill to reconcile it. Idempotency keys are derived by
// allot.IdempotencyKey; this package only checks their form. The JSON API both the client and a
// vendor speak is in package vendorapi; a simulated vendor for tests and
// the dev setup is in package paidvendortest.
//
// Rules the package keeps (invariants 7 and 11 of docs/design.md):
//
//   - A submission is sent at most once per Submit call. The HTTP client
//     disables the standard library's transparent re-send of POSTs carrying an
//     Idempotency-Key header, so a lost response is reported to the caller as
//     a transport error (the "outcome unknown" case) instead of being retried
//     behind its back; the caller decides, via LookupByIdempotencyKey.
//   - The API key never appears in errors, in fmt or slog output of the
//     client, or in the simulator's logs.
package paidvendor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"allot/paidvendor/vendorapi"
)

// Status is the vendor-side state of a task.
type Status string

// Task states. Queued and running are in progress; succeeded and failed are
// terminal.
const (
	StatusQueued    Status = vendorapi.StatusQueued
	StatusRunning   Status = vendorapi.StatusRunning
	StatusSucceeded Status = vendorapi.StatusSucceeded
	StatusFailed    Status = vendorapi.StatusFailed
)

// Valid reports whether s is one of the four known states.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed:
		return true
	}
	return false
}

// Cost is an amount of money in minor units (cents for USD).
type Cost struct {
	Amount   int64  `json:"amount"`   // minor units, e.g. cents
	Currency string `json:"currency"` // ISO 4217 code, e.g. "USD"
}

// Task is one vendor task as the vendor reports it.
type Task struct {
	ID             string // the remote reference, "vt_<hex>"
	IdempotencyKey string
	Kind           string
	Status         Status
	SHA256         string // lowercase hex of the result bytes, set when succeeded
	Cost           Cost
	Error          string // why it failed, if failed
}

// SubmitRequest asks the vendor to start one paid task.
type SubmitRequest struct {
	IdempotencyKey string // a UUID in canonical form; see IdempotencyKey
	Kind           string
	Params         map[string]string
}

// Charge is one line of the vendor's bill.
type Charge struct {
	ID             string // the vendor's line ID, unique and stable: drift is recorded once per line
	TaskID         string
	IdempotencyKey string
	Amount         int64 // minor units, never negative; a refund's too
	Currency       string
	At             time.Time
	Refund         bool // money given back for the task, not charged
}

// BillReader reads a vendor's bill page by page from a watermark.
type BillReader interface {
	ReadBill(ctx context.Context, in ReadBillInput) (BillPage, error)
}

// ReadBillInput says where to read a vendor's bill from.
type ReadBillInput struct {
	After string // the watermark: the cursor after the last line read; "" = from the start
	Limit int    // at most this many lines; 0 = the vendor's default
}

// BillPage is one page of a vendor's bill, oldest line first.
type BillPage struct {
	Lines   []Charge
	Next    string // the watermark after Lines (== After when Lines is empty)
	HasMore bool
	// Account is the vendor's own ID of the account the key bills to,
	// where its bill says; "" where it does not.
	Account string
}

// Client is what the paid activities need from a vendor, and no more: a
// fake for tests implements these four methods. The vendor's bill is not
// here: production activities never read it (see BillReader).
type Client interface {
	// Submit starts a task, or returns the task already started under the
	// same idempotency key. A transport error (connection reset, EOF,
	// timeout) means the outcome is unknown: the vendor may have accepted
	// and charged. Ask LookupByIdempotencyKey before anything else.
	Submit(ctx context.Context, req SubmitRequest) (Task, error)
	// Task returns the current state of a task by its remote reference.
	Task(ctx context.Context, id string) (Task, error)
	// LookupByIdempotencyKey: ErrNotFound if the vendor has no such task,
	// ErrLookupUnsupported if the vendor cannot tell (HTTP 501).
	LookupByIdempotencyKey(ctx context.Context, key string) (Task, error)
	// Result streams the result bytes of a succeeded task; ErrNoResult if
	// the task has not finished or failed. The caller closes the reader.
	Result(ctx context.Context, id string) (io.ReadCloser, error)
}

// Sentinel errors. Match them with errors.Is; an *HTTPError carrying one of
// the HTTP statuses below unwraps to the sentinel, so errors.As still gives
// the status code and body.
var (
	// ErrNotFound: the vendor has no such task (HTTP 404 on a read).
	ErrNotFound = errors.New("paidvendor: not found")
	// ErrLookupUnsupported: the vendor cannot look tasks up by idempotency
	// key (HTTP 501). An unknown outcome stays unknown: park the episode.
	ErrLookupUnsupported = errors.New("paidvendor: vendor cannot look up tasks by idempotency key")
	// ErrUnauthorized: the API key was refused (HTTP 401 or 403). Never retry.
	ErrUnauthorized = errors.New("paidvendor: unauthorized: the vendor refused the API key")
	// ErrNoResult: the task has no result to fetch, because it has not
	// finished or because it failed (HTTP 409 on the result endpoint).
	ErrNoResult = errors.New("paidvendor: task has no result (not finished, or failed)")
	// ErrIdempotencyConflict: the idempotency key was already used for a
	// different request (HTTP 409 on submit). Never retry.
	ErrIdempotencyConflict = errors.New("paidvendor: idempotency key already used for a different request")
	// ErrInvalidTaskID: a reference that cannot be this vendor's task ID.
	// Returned before any request is sent.
	ErrInvalidTaskID = errors.New("paidvendor: invalid task id")
	// ErrInvalidRequest: a request rejected by the client before sending
	// (bad idempotency key, empty kind).
	ErrInvalidRequest = errors.New("paidvendor: invalid request")
	// ErrBadResponse: the vendor answered 2xx with a body that does not
	// follow the API (bad JSON, unknown status, foreign task ID, ...).
	ErrBadResponse = errors.New("paidvendor: malformed vendor response")
)

// HTTPError is a non-2xx answer from the vendor. For 401/403, 404 (reads),
// 409 and 501 (lookup) it unwraps to the matching sentinel.
type HTTPError struct {
	Op         string // what the client was doing, e.g. "submit"
	StatusCode int
	Body       string // at most maxErrorBody bytes, API key redacted
	sentinel   error
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	b.WriteString("paidvendor: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "vendor answered HTTP %d", e.StatusCode)
	if body := strings.TrimSpace(e.Body); body != "" {
		b.WriteString(": ")
		b.WriteString(body)
	}
	return b.String()
}

// Unwrap returns the sentinel matching the status, or nil.
func (e *HTTPError) Unwrap() error { return e.sentinel }

// Temporary reports whether repeating the same request later may succeed:
// true for 429 and 5xx, false for other 4xx. 501 is false: it means the
// endpoint is not implemented (e.g. lookup disabled), which no retry fixes.
func (e *HTTPError) Temporary() bool {
	switch {
	case e.StatusCode == 429:
		return true
	case e.StatusCode == 501:
		return false
	case e.StatusCode >= 500 && e.StatusCode <= 599:
		return true
	}
	return false
}

// TransportError is a request whose response never arrived or arrived
// broken: the connection failed, was reset or closed, or timed out. For a
// Submit it is the "response lost" case: the vendor may have accepted. It
// wraps the underlying error, so errors.Is(err, context.DeadlineExceeded),
// errors.Is(err, io.EOF) and errors.As(err, *net.OpError) keep working.
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string {
	return "paidvendor: " + e.Op + ": no usable response from the vendor: " + e.Err.Error()
}

func (e *TransportError) Unwrap() error { return e.Err }

// Task ID format: vendorapi.TaskIDPrefix followed by 8 to 64 lowercase hex
// digits.
const (
	taskIDPrefix    = vendorapi.TaskIDPrefix
	taskIDMinDigits = 8
	taskIDMaxDigits = 64
)

// ValidateTaskID checks that id can be a task ID of this vendor
// ("vt_<hex>"). The error wraps ErrInvalidTaskID and says what is wrong.
func ValidateTaskID(id string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidTaskID, quoteForError(id), why)
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: empty: a task ID looks like vt_<hex>", ErrInvalidTaskID)
	case strings.ContainsAny(id, "/\\"):
		return bad("contains a slash, so it is a path, not a vendor reference")
	case strings.ContainsAny(id, "?#&%="):
		return bad("contains URL syntax (?, #, &, %, =), not allowed in a vendor reference")
	case strings.IndexFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f || r > 0x7e }) >= 0:
		return bad("contains a space, control or non-ASCII character")
	case !strings.HasPrefix(id, taskIDPrefix):
		return bad("does not start with " + taskIDPrefix + ": not this vendor's reference")
	}
	digits := id[len(taskIDPrefix):]
	if len(digits) < taskIDMinDigits || len(digits) > taskIDMaxDigits {
		return bad(fmt.Sprintf("needs %d to %d hex digits after %s, has %d", taskIDMinDigits, taskIDMaxDigits, taskIDPrefix, len(digits)))
	}
	for _, c := range []byte(digits) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return bad("has a character that is not a lowercase hex digit after " + taskIDPrefix)
		}
	}
	return nil
}

// quoteForError quotes a caller-supplied value for an error message, cut to
// a readable length.
func quoteForError(s string) string {
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// isSHA256Hex reports whether s is 64 lowercase hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
