package payonce

// Driver makes the calls of the paid protocol for Drive, in one of two
// shapes: inside one activity (http and go adapters, SubmitPaidTask) or as
// activities of the Episode workflow with the vendor's own activities in
// between (activity adapters). A driver only makes calls; it never decides
// a phase. R is the ledger's view of the task once done.
type Driver[R any] interface {
	// Prepare runs PaidPrepare as the drive's attempt-th attempt, which
	// owns the intents it writes.
	Prepare(attempt int) (Plan[R], error)
	// Quote asks the vendor for the price of plan.QuoteRequest and runs
	// PaidPrepare again, for the same attempt, with the quote (or saying
	// the adapter gives none).
	Quote(plan Plan[R]) (Plan[R], error)
	// Lookup asks the vendor by the plan's idempotency key.
	Lookup(plan Plan[R]) (LookupOutcome, error)
	// AfterLookup runs PaidAfterLookup on the vendor's answer.
	AfterLookup(plan Plan[R], out LookupOutcome) (Plan[R], error)
	// Wait waits out an earlier send's deadline (plan.WaitUntil): nil
	// prepares again as the next attempt; an error ends the drive.
	Wait(plan Plan[R]) error
	// Send runs PaidBeginSend, the vendor's submit, and PaidAfterSend.
	Send(plan Plan[R]) (R, error)
	// Again says, after a send that ended with err, whether the drive
	// makes another attempt (which asks the vendor first).
	Again(attempt int, err error) (bool, error)
}

// Drive is the one loop of the paid protocol (invariant 7 of
// docs/design.md), for every driver: prepare (the ledger decides the
// phase), ask the vendor while the phase says so, then finish, wait or
// send; a send without an answer, or a wait, starts another attempt if the
// driver makes one.
func Drive[R any](d Driver[R]) (R, error) {
	var none R
	for attempt := 0; ; attempt++ {
		plan, err := d.Prepare(attempt)
		if err != nil {
			return none, err
		}
		if plan.Next == NextQuote {
			if plan, err = d.Quote(plan); err != nil {
				return none, err
			}
			if plan.Next == NextQuote {
				return none, invalid("paid protocol: a quote was asked again after the vendor's answer")
			}
		}
		for plan.Next == NextLookup {
			out, err := d.Lookup(plan)
			if err != nil {
				return none, err
			}
			if plan, err = d.AfterLookup(plan, out); err != nil {
				return none, err
			}
		}
		switch plan.Next {
		case NextDone:
			if plan.Result == nil {
				return none, invalid("paid protocol: the phase is done without a result")
			}
			return *plan.Result, nil
		case NextWait:
			if err := d.Wait(plan); err != nil {
				return none, err
			}
		case NextSend:
			res, err := d.Send(plan)
			again, aerr := d.Again(attempt, err)
			if aerr != nil {
				return none, aerr
			}
			if !again {
				return res, err
			}
		default:
			return none, invalid("paid protocol: unknown next phase %q", plan.Next)
		}
	}
}
