package console

import "allot"

// The page speaks to people who pay, not to the ledger: each outcome and
// reason it shows is said in words, with the ledger's term beside it in
// parentheses, so a search of the docs or the logs still finds it.

// outcomeWords says an episode's outcome as a sentence's verb.
var outcomeWords = map[allot.Outcome]string{
	allot.OutcomeNeedsAttention:  "needs a decision",
	allot.OutcomeWaitingApproval: "waits for approval",
	allot.OutcomeWaitingVendor:   "waits for its vendor",
	allot.OutcomeWaitingBatch:    "waits for a vendor batch",
	allot.OutcomeFailed:          "failed",
	allot.OutcomeRetrying:        "is retrying a step",
	allot.OutcomeRunning:         "is running",
	allot.OutcomeCompleted:       "completed",
	allot.OutcomeRejected:        "was rejected",
}

// reasonWords says why, for the reasons an operator meets on the page.
var reasonWords = map[string]string{
	allot.BudgetExhausted:          "its budget has no room for the next paid step",
	allot.OutcomeUnknown:           "a paid request may have reached the vendor, and the vendor cannot say",
	allot.VendorRejected:           "the vendor refused the request",
	allot.VendorTaskFailed:         "the vendor ran the task and it failed",
	allot.ResultHashMismatch:       "the result downloaded is not the one the vendor promised",
	allot.InvalidRemoteRef:         "the vendor does not know the task's reference",
	allot.VendorNotConfigured:      "the worker has no client or key for the vendor",
	allot.IdempotencyHorizonPassed: "the vendor no longer remembers the request's key",
	allot.BatchResultLost:          "the vendor's batch results are gone",
	allot.StepFailure:              "a step failed",
	allot.ReasonAwaitingApproval:   "at the approval gate",
	allot.ReasonVendorPaused:       "an operator paused the vendor",
	allot.ReasonVendorTripped:      "the vendor's breaker is open after failures",
	allot.ReasonVendorBusy:         "the vendor has as many requests in flight as it takes",
	allot.ReasonVendorRate:         "the vendor's rate is spent for now",
	allot.ReasonVendorBatchQueue:   "the vendor's batch queue is full",
	allot.ReasonBatchQueued:        "it waits for its batch to close",
	allot.ReasonBatchRunning:       "its batch runs at the vendor",
}

// sayOutcome is an outcome in words ("needs a decision"), or the term
// itself when it has none.
func sayOutcome(o string) string {
	if w, ok := outcomeWords[allot.Outcome(o)]; ok {
		return w
	}
	return o
}

// sayEpisode is how a waiting episode stands, in words: an episode parked
// on its budget waits for room, which a raise gives, rather than for a
// decision.
func sayEpisode(e allot.Episode) string {
	if allot.Outcome(e.Outcome) == allot.OutcomeNeedsAttention && e.OutcomeReason == allot.BudgetExhausted {
		return "waits for room in its budget"
	}
	return sayOutcome(e.Outcome)
}

// sayReason is a reason in words with its term: "its budget has no room
// for the next paid step (BudgetExhausted)"; a reason without words is
// shown as it is.
func sayReason(r string) string {
	if w, ok := reasonWords[r]; ok {
		return w + " (" + r + ")"
	}
	return r
}
