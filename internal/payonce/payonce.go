// Package payonce is the paid protocol without its I/O: how a paid (or
// effect) task, one (episode, step, revision), reaches its vendor at most
// once (invariant 7 of docs/design.md, and its section "The paid
// protocol"). Paying once means: the intent is written, owned by one
// attempt, before the vendor is called; only its owner sends; a send that
// may have reached the vendor is looked up by idempotency key before
// anything is sent again; a vendor that cannot tell parks the episode
// instead of being sent the task again.
//
// Here are the phases, the ledger's decision of the next one (NextPhase),
// the messages of the phases, and the one loop (Drive) that acts on them
// for every adapter. The ledger's writes and the vendor's calls are a
// Driver's: allot's activities for adapters this worker calls, the Episode
// workflow for activity adapters. No code here reads a clock, a ledger or
// a vendor, so the workflow runs it as it is.
package payonce

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/paidvendor"
)

// Phase is what the protocol does next for a paid task. Its values are in
// workflow histories (Plan.Next), so they never change.
type Phase string

// The phases. Only the ledger decides which comes next (NextPhase, and
// PaidAfterLookup after a look-up); only Drive acts on them.
const (
	NextDone   Phase = "done"   // the ledger has the vendor's answer: Result
	NextLookup Phase = "lookup" // ask the vendor by IdempotencyKey, then PaidAfterLookup
	NextSend   Phase = "send"   // PaidBeginSend, send, then PaidAfterSend
	NextWait   Phase = "wait"   // an earlier send may still arrive: prepare again after WaitUntil
	// NextQuote: a budget covers the task, which is about to become an
	// intent, and its vendor may quote: ask it for QuoteRequest's price,
	// then prepare again with the quote (nothing is written before).
	NextQuote Phase = "quote"
)

// NextPhase decides what attempt owner does with task, as WriteIntent left
// it, at now: a task past its intent is done; the owner's own intent that
// nothing sent yet is sent; while an earlier send may still arrive, wait
// for its deadline (before it, the vendor's "nothing" proves nothing);
// else (another attempt's intent, or a send that may have reached the
// vendor) ask the vendor before anything is sent.
func NextPhase(task allot.PaidTask, owner string, now time.Time) Phase {
	switch {
	case task.State != allot.PaidIntent:
		return NextDone
	case task.Owner == owner && !task.MaybeSent:
		return NextSend
	case task.MaybeSent && now.Before(task.SendingUntil):
		return NextWait
	}
	return NextLookup
}

// Plan is where the protocol stands for one attempt, and what it does
// next. R is the ledger's view of the task once done, which the protocol
// carries without reading it.
type Plan[R any] struct {
	Next           Phase     `json:"next"`
	Result         *R        `json:"result,omitempty"`
	IdempotencyKey string    `json:"idempotency_key"`
	WaitUntil      time.Time `json:"wait_until,omitzero"`
	// Seen is the intent as it was read before the vendor was asked: a
	// take-over after the vendor's "nothing" is refused if it changed.
	Seen allot.PaidTask `json:"seen"`
	// AskedAbsent: the vendor said it had nothing, in this attempt.
	AskedAbsent bool `json:"asked_absent,omitempty"`
	// QuoteRequest is the request to price (NextQuote): what the send
	// would carry.
	QuoteRequest *paidvendor.SubmitRequest `json:"quote_request,omitempty"`
}

// LookupOutcome is what the vendor answered to a look-up by key.
type LookupOutcome struct {
	Found        *paidvendor.Task `json:"found,omitempty"`
	NotFound     bool             `json:"not_found,omitempty"`
	Unsupported  bool             `json:"unsupported,omitempty"`
	Unauthorized bool             `json:"unauthorized,omitempty"`
	// Error is any other failure (the vendor did not answer): retry.
	Error string `json:"error,omitempty"`
}

// SendRequest is one send, begun: the request and its deadline.
type SendRequest struct {
	Request paidvendor.SubmitRequest `json:"request"`
	Until   time.Time                `json:"until"`
}

// SendOutcome is what the vendor answered to a send.
type SendOutcome struct {
	Accepted     *paidvendor.Task `json:"accepted,omitempty"`
	Refused      bool             `json:"refused,omitempty"`
	Unauthorized bool             `json:"unauthorized,omitempty"`
	Error        string           `json:"error,omitempty"`
}

// invalid ends a drive on a plan the protocol does not allow (a plan from
// a newer or broken worker): no retry makes it valid.
func invalid(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), allot.InvalidInput, nil)
}
