package allot

import (
	"errors"
	"fmt"
)

// Error is allot's one error: a Type from the list below, which callers
// and tests match, and a Message for people that names the problem and the
// fix. The ledger, the pipeline file, the operator and the CLI return it
// (the ledger's sentinels are Errors, so errors.Is still tells them
// apart); it becomes a Temporal application error once, at the activity
// boundary, with the same type.
type Error struct {
	Type    string
	Message string
	// Err is a sentinel the error is, for errors.Is (an operator's
	// ErrBackfillNeedsConsent); it is not part of the message.
	Err error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// Errorf is an Error of the given type whose message is formatted as
// fmt.Sprintf does.
func Errorf(typ, format string, args ...any) *Error {
	return &Error{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// Wrapf is Errorf whose error is also sentinel, for errors.Is.
func Wrapf(sentinel error, typ, format string, args ...any) *Error {
	e := Errorf(typ, format, args...)
	e.Err = sentinel
	return e
}

// ErrorType is the type of the first typed error in err's chain: an
// Error's Type, or the Type of an error that reports one (a Temporal
// application error, as a failed workflow, update or activity returns
// it). "" when there is none: an I/O failure, a context's end.
func ErrorType(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Type
	}
	var typed interface{ Type() string }
	if errors.As(err, &typed) {
		return typed.Type()
	}
	return ""
}

// ErrorMessage is err's message for people: a Temporal application error's
// own message (without the SDK's decoration of type and retry state), else
// err.Error().
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return err.Error()
	}
	var msg interface {
		Type() string
		Message() string
	}
	if errors.As(err, &msg) {
		return msg.Message()
	}
	return err.Error()
}

// Error types: the Type of allot's Errors and of the Temporal application
// errors its activities and workflows return. Callers and tests match on
// these, never on messages. Every one of them is non-retryable.
const (
	// Allocation and input.
	EpisodeNotFound            = "EpisodeNotFound"
	AllocationKeyCrossesPeriod = "AllocationKeyCrossesPeriod"
	AllocationKeyAmbiguous     = "AllocationKeyAmbiguous"
	InvalidAllocationKey       = "InvalidAllocationKey"
	PipelineNotFound           = "PipelineNotFound"
	InvalidPipelineName        = "InvalidPipelineName"
	StepNotFound               = "StepNotFound"
	InvalidInput               = "InvalidInput"

	// Paid steps. Each parks the episode as needs_attention until an
	// operator decides.
	OutcomeUnknown = "OutcomeUnknown" // an intent that may have reached the vendor, and the vendor cannot tell
	// IdempotencyHorizonPassed: an intent that may have reached the
	// vendor is older than the vendor keeps idempotency keys
	// (idempotency_horizon): a look-up that finds nothing proves nothing
	// and a resend could pay twice, so a person checks the vendor's side.
	IdempotencyHorizonPassed = "IdempotencyHorizonPassed"
	VendorRejected           = "VendorRejected"      // the vendor definitely refused the submission
	VendorTaskFailed         = "VendorTaskFailed"    // the vendor accepted the task and reports it failed
	ResultHashMismatch       = "ResultHashMismatch"  // the downloaded result is not the bytes the vendor promised
	InvalidRemoteRef         = "InvalidRemoteRef"    // a reference that is not the vendor's, or not this task's
	VendorNotConfigured      = "VendorNotConfigured" // no vendor client or credentials on this worker
	// BatchResultLost: a batch item's batch ended but its result files do
	// not say what became of it (they are gone): it may have been billed,
	// so it is never sent again by itself; a person checks the vendor's
	// bill and gives the step up (docs/design.md, "Batches").
	BatchResultLost = "BatchResultLost"

	// BudgetExhausted: a paid task whose reservation does not fit in a
	// budget that covers it (settled + reserved + asked > limit for the
	// budget's period), or that has no price to reserve. Nothing was sent;
	// the task is planned and the episode parks until the budget is raised
	// (it then resumes by itself) or an operator retries or abandons it.
	BudgetExhausted = "BudgetExhausted"

	// StepFailure: a step that is not paid (go, exec, activity) failed in
	// a way retrying will not fix (a command's exit code, a Go step's
	// step.Park, an activity step's last attempt). It parks the episode.
	StepFailure = "StepFailure"

	// LedgerMismatch: a workflow of one ledger reached a worker of
	// another (two ledgers on one namespace and task queue).
	LedgerMismatch = "LedgerMismatch"

	// Ledger refusals: a paid-task change the task's state, owner or
	// reference does not allow. Nothing was written.
	PaidTaskStateConflict = "PaidTaskStateConflict"
	PaidTaskNotFound      = "PaidTaskNotFound"
	RemoteRefConflict     = "RemoteRefConflict"

	// NotReady: an operator command the episode cannot take in its
	// current state (approve when not at the gate, resolve with nothing to
	// resolve). It changes nothing.
	NotReady = "NotReady"

	// ConsentRequired: an operator command that would start more runs
	// than the pipeline allows without asking (a backfill beyond
	// max_backfill_runs) was given without --yes. Nothing was sent.
	ConsentRequired = "ConsentRequired"

	// NominalTimesUnknown: a fast backfill (allot starting the runs
	// itself) of a schedule whose jitter hides the nominal times of its
	// spec, so allot cannot form the runs' keys. Nothing was started; the
	// Schedule's own backfill (--via-schedule) can run them.
	NominalTimesUnknown = "NominalTimesUnknown"

	// Inputs (starter input). InputConflict: the reference was added with
	// other data; InputNotFound: no input of that reference; InputClaimed:
	// an episode claimed it, so it can no longer be withdrawn.
	InputConflict = "InputConflict"
	InputNotFound = "InputNotFound"
	InputClaimed  = "InputClaimed"

	// RequestConflict: an operator's request ID (budget raise
	// --request-id) recorded already with other arguments. Nothing was
	// written; the message shows both requests.
	RequestConflict = "RequestConflict"

	// Drift items (starter drift). DriftNotFound: no drift item of that
	// ID; DriftAcknowledged: the item was acknowledged already (the message
	// says by whom and why). Nothing was written.
	DriftNotFound     = "DriftNotFound"
	DriftAcknowledged = "DriftAcknowledged"
)

// NonRetryableErrorTypes lists every error type above; retry policies name
// them too, so that a mis-wrapped error still does not loop.
var NonRetryableErrorTypes = []string{
	EpisodeNotFound, AllocationKeyCrossesPeriod, AllocationKeyAmbiguous,
	InvalidAllocationKey, PipelineNotFound, InvalidPipelineName, StepNotFound, InvalidInput,
	OutcomeUnknown, IdempotencyHorizonPassed, VendorRejected, VendorTaskFailed, ResultHashMismatch, InvalidRemoteRef, VendorNotConfigured, BudgetExhausted, StepFailure,
	BatchResultLost, PaidTaskStateConflict, PaidTaskNotFound, RemoteRefConflict, NotReady, LedgerMismatch, ConsentRequired, NominalTimesUnknown,
	InputConflict, InputNotFound, InputClaimed, RequestConflict, DriftNotFound, DriftAcknowledged,
}

// SendUnanswered is retryable: a send of a paid task got no answer (lost
// response, timeout, 5xx), so the next attempt asks the vendor by
// idempotency key before anything else. The activity adapters' workflow
// code asks at once instead of retrying the bookkeeping activity that
// reported it.
const SendUnanswered = "SendUnanswered"

// SendInFlight is retryable too: an earlier attempt's send
// of a paid task may still reach the vendor, so no attempt may ask or send
// until its deadline has passed. The error carries the delay to that
// deadline as its next retry delay.
const SendInFlight = "SendInFlight"

// VendorWaiting is retryable too: the step's vendor takes no request of
// this kind now (paused, its breaker open, its slots or tokens taken), and
// nothing was sent. The error's next retry delay says when to ask again;
// its details are an activities.VendorWait. The Episode shows the wait as
// the stage waiting_vendor instead of counting it as a failed attempt.
const VendorWaiting = "VendorWaiting"

// WorkerStopped is retryable, and benign: the worker stopped while an
// activity ran (Ctrl-C, SIGTERM, a deploy), which ended the attempt; the
// next attempt, on any worker, goes on from the ledger. It is not a
// failure, and is logged as none.
const WorkerStopped = "WorkerStopped"

// Closest is the name of names at the least edit distance from s, however
// far: the first of them on a tie.
func Closest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// Nearest is the name of names a mistyped s was most likely meant to be,
// for an error's "did you mean": the closest, if few enough letters differ
// to be a typo (a third of them, at least one); ok is false otherwise.
func Nearest(s string, names []string) (string, bool) {
	n := Closest(s, names)
	if n == "" || editDistance(s, n) > max(1, len(s)/3) {
		return "", false
	}
	return n, true
}

// editDistance is the Levenshtein distance of a and b (bytes: the names
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
