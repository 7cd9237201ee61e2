package activities

// The paid protocol's phases (invariant 7 of docs/design.md; its loop and
// next-phase decision are package payonce), as activities, so that one
// implementation serves both kinds of adapters: one this worker calls itself
// (http, go: SubmitPaidTask runs the phases in one activity) and one of
// another worker (activity: the Episode runs each phase as an activity and
// calls the vendor's activities in between). Effect steps go through the
// same phases; they have no cost and nothing to fetch.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/paidvendor"
	"allot/pipeline"
)

// PaidPhaseInput names a paid task and the attempt (owner) working on it.
type PaidPhaseInput struct {
	PaidTaskInput
	Owner string `json:"owner"`
	// Quote is the vendor's price for the task, asked before its intent
	// (payonce.NextQuote); NoQuote says the adapter gives none. Either way
	// PaidPrepare then reserves without asking again.
	Quote   *paidvendor.Cost `json:"quote,omitempty"`
	NoQuote bool             `json:"no_quote,omitempty"`
}

// PaidPlan is the protocol's plan (payonce.Plan) as the phase activities
// give and take it.
type PaidPlan = payonce.Plan[PaidTaskResult]

// SubmitPaidTask sends a paid (or effect) task to its vendor at most once,
// through an adapter this worker calls itself. In order:
//
//  1. The episode must exist, before any credential is read or client built.
//  2. The intent is written, owned by this attempt. A task the vendor has
//     already accepted (a reference is written) is returned as is.
//  3. If another attempt owns the intent, or a send may have reached the
//     vendor, the vendor is asked by idempotency key once no earlier send can
//     still arrive: a task it has is adopted; if it has none, this attempt
//     takes the intent over; if it cannot tell and a send may have reached
//     it, the episode parks (OutcomeUnknown). Only an operator's resubmit
//     lets a send go without that answer.
//  4. The send is marked (MaybeSent, with its deadline) and the vendor
//     called; its reference and cost are written before anything else.
//
// A definite refusal (4xx) puts the intent back to planned and parks the
// episode (VendorRejected, or VendorNotConfigured when the key was refused);
// any other failure leaves the outcome unknown, and the retry starts at 3.
func (a *Activities) SubmitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
	res, err := a.submitPaidTask(ctx, in)
	return res, a.withTaskState(ctx, in.ref(), err)
}

func (a *Activities) submitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
	d := &activityDriver{a: a, ctx: ctx, in: in, phase: PaidPhaseInput{PaidTaskInput: in, Owner: attemptToken(ctx)}}
	defer func() { d.pass.leave(ctx) }()
	// The whole attempt heartbeats, not only its vendor calls: a killed
	// worker's attempt is retried at the heartbeat timeout, which a short
	// send_timeout makes short too.
	return withHeartbeat(ctx, func(context.Context) (PaidTaskResult, error) { return payonce.Drive(d) })
}

// activityDriver (a payonce.Driver) drives a paid task inside one activity
// attempt (http and go adapters): the ledger phases are direct calls, and
// the attempt makes one try only; Temporal's retry of the activity is the
// next attempt.
type activityDriver struct {
	a     *Activities
	ctx   context.Context
	in    PaidTaskInput
	phase PaidPhaseInput
	// vendor is built at the first call to it, after the episode check
	// (invariant 6): a task that is done or must wait reads no credential.
	vendor paidvendor.Submitter
	// pass is the admission's pass (Prepare), not yet used by a request;
	// vendorName is the step's vendor. admitted: the gate let one of the
	// attempt's requests go, and the rate counted the attempt then.
	pass       *vendorPass
	vendorName string
	admitted   bool
}

func (d *activityDriver) Prepare(int) (PaidPlan, error) {
	if err := d.admit(); err != nil {
		return PaidPlan{}, err
	}
	return d.a.PaidPrepare(d.ctx, d.phase)
}

// admit asks the vendor's gate (vendor_gate.go) for the attempt's send
// before the intent is written, so that a paused, tripped or busy vendor
// costs a wait and nothing else; a task that is done, or waits for an
// earlier send's deadline, makes no request and is not admitted. The pass
// serves the attempt's first request; every later one asks again (request).
func (d *activityDriver) admit() error {
	if d.admitted {
		return nil
	}
	if err := d.resolveVendor(); err != nil {
		return err
	}
	task, err := d.a.Ledger.PaidTask(d.ctx, d.in.ref())
	switch {
	case errors.Is(err, ledger.ErrPaidTaskNotFound):
	case err != nil:
		return classify(err)
	case task.State != allot.PaidPlanned && task.State != allot.PaidIntent:
		return nil
	case task.MaybeSent && time.Now().Before(task.SendingUntil):
		return nil
	case task.MaybeSent:
		// An earlier send may have reached the vendor: the attempt's
		// request would be a look-up, which a vendor that cannot be asked
		// is never sent (Lookup), so it asks nothing of the gate either.
		vendor, err := d.submitter()
		if err != nil {
			return err
		}
		if declaresNoLookup(vendor) {
			return nil
		}
	}
	p, err := d.a.enterVendor(d.ctx, d.vendorName, ledger.VendorSend, d.holder())
	if err != nil {
		return err
	}
	d.pass, d.admitted = p, true
	return nil
}

// holder names the attempt's requests at the vendor: one at a time.
func (d *activityDriver) holder() string { return d.phase.Owner + "/send" }

// request passes the gate right before one request to the vendor (a quote,
// a look-up, a send: a submission's requests, which a pause of sends
// stops): the admission's pass if no request used it yet, else the gate is
// asked again, so that a pause, a trip or a full vendor that came meanwhile
// stops it (docs/design.md, "Vendor controls": every request asks). The
// rate counts the attempt once, at the first pass. The caller reports the
// request's outcome (observe) and leaves the pass.
func (d *activityDriver) request() (*vendorPass, error) {
	if p := d.pass; p != nil {
		d.pass = nil
		return p, nil
	}
	if err := d.resolveVendor(); err != nil {
		return nil, err
	}
	p, err := d.a.enterVendorOf(d.ctx, d.vendorName, ledger.VendorSend, d.holder(), d.admitted)
	if err != nil {
		return nil, err
	}
	d.admitted = true
	return p, nil
}

// resolveVendor names the step's vendor, after the episode check.
func (d *activityDriver) resolveVendor() error {
	if d.vendorName != "" {
		return nil
	}
	_, _, st, err := d.a.paidStep(d.ctx, d.in)
	if err != nil {
		return err
	}
	d.vendorName = vendorOf(st)
	return nil
}

// Quote asks a Go adapter that implements paidvendor.Quoter, through the
// vendor's gate; a quote that fails counts for the breaker as any request.
// Any other adapter gives no quote.
func (d *activityDriver) Quote(plan PaidPlan) (PaidPlan, error) {
	vendor, err := d.submitter()
	if err != nil {
		return PaidPlan{}, err
	}
	in := d.phase
	q, ok := vendor.(paidvendor.Quoter)
	switch {
	case !ok || plan.QuoteRequest == nil:
		in.NoQuote = true
	default:
		pass, err := d.request() // the quote asks the gate
		if err != nil {
			return PaidPlan{}, err
		}
		cost, err := withHeartbeat(d.ctx, func(ctx context.Context) (paidvendor.Cost, error) { return q.Quote(ctx, *plan.QuoteRequest) })
		pass.observeFailure(err) // a failed quote counts toward the breaker
		pass.leave(d.ctx)
		switch {
		case errors.Is(err, paidvendor.ErrUnauthorized):
			return PaidPlan{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while quoting paid task %s/%s step %s: %v", d.in.Pipeline, d.in.EpisodeID, d.in.Step, err)
		case err != nil:
			return PaidPlan{}, fmt.Errorf("quote paid task %s/%s step %s: %w", d.in.Pipeline, d.in.EpisodeID, d.in.Step, err)
		}
		in.Quote = &cost
	}
	return d.a.PaidPrepare(d.ctx, in)
}

func (d *activityDriver) submitter() (paidvendor.Submitter, error) {
	if d.vendor == nil {
		v, err := d.a.submitter(d.ctx, d.in)
		if err != nil {
			return nil, err
		}
		d.vendor = v
	}
	return d.vendor, nil
}

func (d *activityDriver) Lookup(plan PaidPlan) (payonce.LookupOutcome, error) {
	vendor, err := d.submitter()
	if err != nil {
		return payonce.LookupOutcome{}, err
	}
	if declaresNoLookup(vendor) {
		// Its vendor cannot be asked (docs/design.md, "What a vendor can
		// promise"): nothing is sent, so nothing asks the gate, and a
		// paused or tripped vendor does not hold the park for a person.
		return payonce.LookupOutcome{Unsupported: true}, nil
	}
	pass, err := d.request() // the look-up asks the gate
	if err != nil {
		return payonce.LookupOutcome{}, err
	}
	found, err := withHeartbeat(d.ctx, func(ctx context.Context) (paidvendor.Task, error) {
		return vendor.LookupByIdempotencyKey(ctx, plan.IdempotencyKey)
	})
	pass.observeFailure(err)
	pass.leave(d.ctx)
	return lookupOutcome(found, err), nil
}

func (d *activityDriver) AfterLookup(plan PaidPlan, out payonce.LookupOutcome) (PaidPlan, error) {
	return d.a.paidAfterLookup(d.ctx, d.phase, plan, out)
}

// Wait ends the attempt: the next one comes right after the deadline, as
// the activity adapters' workflow sleeps until it (with the retry policy's
// backoff, 1 s, 2 s, ..., the step's batch of attempts ran out long before
// a 30 s send window did, and the step then paused a minute more).
func (d *activityDriver) Wait(plan PaidPlan) error {
	// A deadline that is near is waited for here (the attempt heartbeats
	// meanwhile): an attempt scheduled again would only come later.
	if wait := time.Until(plan.WaitUntil) + nearDeadlineMargin; wait <= nearDeadline {
		select {
		case <-d.ctx.Done():
			return d.ctx.Err()
		case <-time.After(max(wait, 0)):
			return nil
		}
	}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("an earlier attempt's send of %s step %s may reach the vendor until %s; asking then",
			d.in.EpisodeID, d.in.Step, plan.WaitUntil.Format(time.RFC3339)),
		allot.SendInFlight, temporal.ApplicationErrorOptions{NextRetryDelay: max(time.Until(plan.WaitUntil), 0) + afterDeadline, Category: waitCategory})
}

// afterDeadline is how long after an earlier send's deadline the next
// attempt comes. Only efficiency rides on it: an attempt that comes too
// soon (another worker's clock) finds the send in flight and waits again
// (payonce.NextPhase, TakeIntent). A recovery from a killed sender takes
// the send's deadline, this and a look-up, so it is kept short.
const afterDeadline = 250 * time.Millisecond

// nearDeadline: an attempt whose earlier send's deadline is this close
// waits for it within the activity, and asks the vendor nearDeadlineMargin
// after it.
const (
	nearDeadline       = 2 * time.Second
	nearDeadlineMargin = 50 * time.Millisecond
)

func (d *activityDriver) Send(plan PaidPlan) (PaidTaskResult, error) {
	pass, err := d.request() // the send asks the gate
	if err != nil {
		return PaidTaskResult{}, err
	}
	defer pass.leave(d.ctx)
	vendor, err := d.submitter()
	if err != nil {
		return PaidTaskResult{}, err
	}
	send, err := d.a.PaidBeginSend(d.ctx, PaidSendInput{PaidPhaseInput: d.phase, Plan: plan})
	if err != nil {
		return PaidTaskResult{}, err
	}
	sendCtx, cancel := context.WithDeadline(d.ctx, send.Until)
	accepted, err := withHeartbeat(sendCtx, func(ctx context.Context) (paidvendor.Task, error) {
		return vendor.Submit(ctx, send.Request)
	})
	cancel()
	pass.observe(err)
	return d.a.PaidAfterSend(d.ctx, PaidAfterSendInput{PaidPhaseInput: d.phase, Plan: plan, Outcome: sendOutcome(accepted, err)})
}

// Again: never within the activity; its retry is the next attempt.
func (d *activityDriver) Again(int, error) (bool, error) { return false, nil }

func lookupOutcome(t paidvendor.Task, err error) payonce.LookupOutcome {
	switch {
	case err == nil:
		return payonce.LookupOutcome{Found: &t}
	case errors.Is(err, paidvendor.ErrNotFound):
		return payonce.LookupOutcome{NotFound: true}
	case errors.Is(err, paidvendor.ErrLookupUnsupported):
		return payonce.LookupOutcome{Unsupported: true}
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return payonce.LookupOutcome{Unauthorized: true, Error: err.Error()}
	}
	return payonce.LookupOutcome{Error: err.Error()}
}

func sendOutcome(t paidvendor.Task, err error) payonce.SendOutcome {
	switch {
	case err == nil:
		return payonce.SendOutcome{Accepted: &t}
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return payonce.SendOutcome{Refused: true, Unauthorized: true, Error: err.Error()}
	case refused(err):
		return payonce.SendOutcome{Refused: true, Error: err.Error()}
	}
	return payonce.SendOutcome{Error: err.Error()}
}

// PaidPrepare writes the intent for the attempt and says what to do next:
// done (the ledger already has the vendor's answer), look up, send, or
// wait for an earlier send's deadline. A task that budgets cover reserves
// its price with the intent (invariant 20); before that, a vendor that may
// quote is asked first (payonce.NextQuote, nothing written), and a task the
// budgets refuse is planned and parks the episode (BudgetExhausted).
func (a *Activities) PaidPrepare(ctx context.Context, in PaidPhaseInput) (PaidPlan, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return PaidPlan{}, err
	}
	if in.Owner == "" {
		return PaidPlan{}, nonRetryable(allot.InvalidInput, "paid task %s/%s step %s: no attempt named as its owner", p.Name, ep.ID, st.Name)
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	key := allot.IdempotencyKey(p.Name, ep.ID, st.Name, in.Revision)
	var task ledger.PaidTask
	for priced := 1; ; priced++ {
		var (
			adm   ledger.Admission
			quote bool
		)
		adm, quote, err = a.admission(ctx, p, ep, st, in)
		if err != nil {
			return PaidPlan{}, err
		}
		if quote {
			req, err := a.sendRequest(ctx, p, ep, st, in.Revision, key)
			if err != nil {
				return PaidPlan{}, err
			}
			return PaidPlan{Next: payonce.NextQuote, IdempotencyKey: key, QuoteRequest: &req}, nil
		}
		if testHookPriced != nil {
			testHookPriced(ref)
		}
		task, err = a.Ledger.WriteIntentAdmitted(ctx, ref, key, in.Owner, adm)
		// Priced from a read the task has since left (another attempt's
		// intent went back to planned): price it again, as it is now.
		if errors.Is(err, ledger.ErrReservationMissing) && priced < maxPricings {
			continue
		}
		break
	}
	if errors.Is(err, ledger.ErrBudgetExhausted) {
		return PaidPlan{}, a.budgetExhausted(ctx, p, ep, st, err)
	}
	if err != nil {
		return PaidPlan{}, classify(err)
	}
	plan := PaidPlan{Next: payonce.NextPhase(task, in.Owner, time.Now()), IdempotencyKey: key, Seen: task}
	switch plan.Next {
	case payonce.NextDone:
		res, err := a.paidResult(ctx, task, st.Kind)
		if err != nil {
			return PaidPlan{}, err
		}
		plan.Result = &res
	case payonce.NextWait:
		plan.WaitUntil = task.SendingUntil
	}
	return plan, nil
}

// maxPricings bounds how often one PaidPrepare prices a task that keeps
// moving under it; past it the attempt fails (retryably) with
// ledger.ErrReservationMissing and nothing written.
const maxPricings = 3

// testHookPriced, when set by a test, runs between pricing a task and
// writing its intent: where another attempt's move would make the price
// stale.
var testHookPriced func(ledger.PaidTaskRef)

// PaidAfterLookupInput is the vendor's answer to a look-up.
type PaidAfterLookupInput struct {
	PaidPhaseInput
	Plan    PaidPlan              `json:"plan"`
	Outcome payonce.LookupOutcome `json:"outcome"`
}

// PaidAfterLookup acts on the vendor's answer: a task it has becomes the
// submission; "nothing" lets this attempt take the intent over and send;
// "cannot tell" parks a task that may have been sent (OutcomeUnknown),
// unless an operator allowed one send without the answer.
func (a *Activities) PaidAfterLookup(ctx context.Context, in PaidAfterLookupInput) (PaidPlan, error) {
	plan, err := a.paidAfterLookup(ctx, in.PaidPhaseInput, in.Plan, in.Outcome)
	return plan, a.withTaskState(ctx, in.ref(), err)
}

func (a *Activities) paidAfterLookup(ctx context.Context, in PaidPhaseInput, plan PaidPlan, out payonce.LookupOutcome) (PaidPlan, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return PaidPlan{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	task := plan.Seen
	switch {
	case out.Found != nil:
		activity.GetLogger(ctx).Info("adopting the vendor task found by idempotency key", "step", st.Name, "revision", in.Revision, "remote_ref", out.Found.ID)
		res, err := a.recordSubmission(ctx, ref, *out.Found, st.Kind)
		if err != nil {
			return PaidPlan{}, err
		}
		a.budgetAlerts(ctx, p, ep, st)
		countSubmission(ctx, p.Name, st.Name, SubmissionAdopted)
		plan.Next, plan.Result = payonce.NextDone, &res
		return plan, nil
	case out.NotFound:
		if err := a.checkHorizon(p.Name, ep.ID, st, task, plan.IdempotencyKey); err != nil {
			countSubmission(ctx, p.Name, st.Name, SubmissionUnknown)
			return PaidPlan{}, err
		}
		plan.AskedAbsent = true
	case out.Unsupported:
		if err := a.checkHorizon(p.Name, ep.ID, st, task, plan.IdempotencyKey); err != nil {
			countSubmission(ctx, p.Name, st.Name, SubmissionUnknown)
			return PaidPlan{}, err
		}
		if task.MaybeSent && task.ResubmitRequest == "" {
			countSubmission(ctx, p.Name, st.Name, SubmissionUnknown)
			return PaidPlan{}, nonRetryable(allot.OutcomeUnknown,
				"paid task %s/%s step %s revision %d: an earlier send may have reached the vendor, and vendor %s cannot be asked whether it ran the request (no look-up by idempotency key %s): a person checks the vendor's side, then resubmits or abandons the step",
				p.Name, ep.ID, st.Name, in.Revision, vendorOf(st), plan.IdempotencyKey)
		}
		// Never sent (its writer died before sending), or an operator
		// allowed this send: go on without the answer.
	case out.Unauthorized:
		return PaidPlan{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while looking up paid task %s/%s step %s: %s", p.Name, ep.ID, st.Name, out.Error)
	default:
		return PaidPlan{}, fmt.Errorf("look up paid task %s/%s step %s by idempotency key: %s", p.Name, ep.ID, st.Name, out.Error)
	}
	if task.Owner != in.Owner {
		if _, err := a.Ledger.TakeIntent(ctx, task, in.Owner, time.Now()); err != nil {
			// Another attempt took it, or began a send, after we read it:
			// the retry asks the vendor again.
			return PaidPlan{}, classify(err)
		}
	}
	plan.Next = payonce.NextSend
	return plan, nil
}

// checkHorizon parks a task that may have reached the vendor (and no
// operator allowed a send without the answer) once its first send is older
// than the vendor keeps idempotency keys: the vendor's "nothing" may then
// mean it forgot the key, and a resend could pay twice
// (IdempotencyHorizonPassed). The horizon counts from the first send, not
// from when the intent was written: a task may wait on its budget or its
// vendor for days before the vendor hears of it (docs/design.md, "Vendor
// controls", idempotency horizon). A task never sent has no horizon.
func (a *Activities) checkHorizon(pipelineName, episodeID string, st pipeline.Step, task ledger.PaidTask, key string) error {
	horizon := a.vendorLimits(vendorOf(st)).Horizon()
	if horizon <= 0 || !task.MaybeSent || task.ResubmitRequest != "" || task.FirstSentAt.IsZero() || clock().Sub(task.FirstSentAt) <= horizon {
		return nil
	}
	return nonRetryable(allot.IdempotencyHorizonPassed,
		"paid task %s/%s step %s revision %d may have reached vendor %s, and it was first sent %s, longer ago than the vendor keeps idempotency keys (idempotency_horizon %s): the vendor may have forgotten key %s, so allot neither trusts a look-up that finds nothing nor sends it again. Check the vendor's side for a task with that key or sent around then: adopt it if it is there (starter episode lookup, or resolve --adopt REF), else resubmit or abandon the step",
		pipelineName, episodeID, st.Name, task.Revision, vendorOf(st), task.FirstSentAt.Format(time.RFC3339), horizon, key)
}

// PaidSendInput begins a send.
type PaidSendInput struct {
	PaidPhaseInput
	Plan PaidPlan `json:"plan"`
}

// PaidBeginSend marks the send (MaybeSent, with its deadline) and gives the
// request to send: the step's kind and params, with the idempotency key.
func (a *Activities) PaidBeginSend(ctx context.Context, in PaidSendInput) (payonce.SendRequest, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return payonce.SendRequest{}, err
	}
	// The request is built (the claimed input read) before the send is
	// marked, so that a failed read sends nothing.
	req, err := a.sendRequest(ctx, p, ep, st, in.Revision, in.Plan.IdempotencyKey)
	if err != nil {
		return payonce.SendRequest{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	until := time.Now().Add(a.sendTimeout(vendorOf(st)))
	if _, err := a.Ledger.MarkSending(ctx, ref, in.Owner, until); err != nil {
		if errors.Is(err, ledger.ErrPaidTaskState) {
			// Another attempt took the intent over and settled it after
			// this one prepared (this one stalled and was retried
			// elsewhere): nothing was sent. Retryable, as when the other
			// still owns the intent (ErrIntentOwned): the retry finds what
			// it did.
			return payonce.SendRequest{}, fmt.Errorf("paid task %s/%s step %s revision %d moved on while this attempt prepared its send; nothing was sent: %w", p.Name, ep.ID, st.Name, in.Revision, err)
		}
		return payonce.SendRequest{}, classify(err)
	}
	return payonce.SendRequest{Request: req, Until: until}, nil
}

// sendRequest is what a send of the task carries (and what a quote
// prices): the step's kind and params, with the idempotency key.
func (a *Activities) sendRequest(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode, st pipeline.Step, revision int, key string) (paidvendor.SubmitRequest, error) {
	// The input the episode claimed (pipelines that consume inputs).
	claimed, err := a.Ledger.EpisodeInput(ctx, p.Name, ep.ID)
	if err != nil {
		return paidvendor.SubmitRequest{}, classify(err)
	}
	params := map[string]string{"pipeline": p.Name, "episode": ep.ID, "step": st.Name, "revision": strconv.Itoa(revision)}
	if claimed != nil {
		// The vendor is told which input this is (a publish names its
		// draft), as an exec step is by {input} and ALLOT_INPUT. The
		// same on every attempt: an episode claims one input, forever.
		params["input"] = claimed.Ref
	}
	for k, v := range st.Params {
		params[k] = v
	}
	return paidvendor.SubmitRequest{IdempotencyKey: key, Kind: st.Action, Params: params}, nil
}

// PaidAfterSendInput is the vendor's answer to a send.
type PaidAfterSendInput struct {
	PaidPhaseInput
	Plan    PaidPlan            `json:"plan"`
	Outcome payonce.SendOutcome `json:"outcome"`
}

// PaidAfterSend writes the vendor's answer before anything else: accepted,
// the reference and its cost; refused, the intent goes back to planned and
// the episode parks; no answer, the send's window closes and the retry asks
// the vendor first.
func (a *Activities) PaidAfterSend(ctx context.Context, in PaidAfterSendInput) (PaidTaskResult, error) {
	res, err := a.paidAfterSend(ctx, in)
	return res, a.withTaskState(ctx, in.ref(), err)
}

func (a *Activities) paidAfterSend(ctx context.Context, in PaidAfterSendInput) (PaidTaskResult, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return PaidTaskResult{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	out := in.Outcome
	switch {
	case out.Accepted != nil:
		activity.GetLogger(ctx).Info("paid task accepted", "step", st.Name, "revision", in.Revision, "remote_ref", out.Accepted.ID,
			"cost", out.Accepted.Cost.Amount, "currency", out.Accepted.Cost.Currency)
		res, err := a.recordSubmission(ctx, ref, *out.Accepted, st.Kind)
		if err == nil {
			countSubmission(ctx, p.Name, st.Name, SubmissionAccepted)
			a.budgetAlerts(ctx, p, ep, st)
		}
		return res, err
	case out.Refused:
		// The vendor said no: this send was not accepted. What may have
		// been sent before stays unknown unless the vendor was asked.
		countSubmission(ctx, p.Name, st.Name, SubmissionRefused)
		if _, err := a.Ledger.ReleaseIntent(ctx, ref, in.Owner, in.Plan.Seen.MaybeSent && !in.Plan.AskedAbsent); err != nil {
			return PaidTaskResult{}, classify(err)
		}
		errType := allot.VendorRejected
		if out.Unauthorized {
			errType = allot.VendorNotConfigured
		}
		return PaidTaskResult{}, nonRetryable(errType, "vendor refused paid task %s/%s step %s revision %d: %s", p.Name, ep.ID, st.Name, in.Revision, out.Error)
	}
	// The outcome is unknown; the retry asks the vendor by idempotency key.
	// This send is over: the vendor decides on a request before it answers,
	// so from now on asking it settles what it did.
	countSubmission(ctx, p.Name, st.Name, SubmissionError)
	if _, err := a.Ledger.EndSend(context.WithoutCancel(ctx), ref, in.Owner, time.Now()); err != nil {
		activity.GetLogger(ctx).Warn("recording the end of a send failed; the retry waits for its deadline", "error", err)
	}
	return PaidTaskResult{}, temporal.NewApplicationError(fmt.Sprintf("submit paid task (the retry asks the vendor for the task by its idempotency key before any resend, or parks the episode where the vendor cannot be asked): %s", out.Error), allot.SendUnanswered)
}

// paidStep resolves a paid or effect step of an existing episode. The
// episode check comes first: a missing episode stops before credentials or
// a client.
func (a *Activities) paidStep(ctx context.Context, in PaidTaskInput) (*pipeline.Pipeline, ledger.Episode, pipeline.Step, error) {
	p, ep, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, LedgerID: in.LedgerID})
	if err != nil {
		return nil, ledger.Episode{}, pipeline.Step{}, err
	}
	st, ok := p.Step(in.Step)
	if !ok {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.StepNotFound, "pipeline %q has no step %q: its steps are %v", p.Name, in.Step, p.StepNames())
	}
	if !st.Kind.Remote() {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.StepNotFound, "step %q of pipeline %q is %s, not paid: paid commands take one of %v", st.Name, p.Name, st.Kind, p.PaidStepNames())
	}
	if in.Revision < 0 {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.InvalidInput, "revision %d is negative", in.Revision)
	}
	return p, ep, st, nil
}
