package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/internal/payonce"
	"allot/paidvendor"
)

// runPaidByActivities runs a paid or effect step whose vendor is an
// activity adapter: the protocol's phases are allot's activities (the same
// code SubmitPaidTask runs in one piece for the other adapters), and the
// vendor's calls are the adapter's activities on its task queue, in
// between. The owner of this attempt's intent is named by the workflow.
func (e *episode) runPaidByActivities(ctx workflow.Context, i int) error {
	st := e.state.Steps[i]
	v := st.Run.Vendor
	in := activities.PaidTaskInput{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Step: st.Name, Revision: st.Revision}
	// The Episode's requests to the adapter pass the vendor's gate
	// (PaidVendorGate); histories from before it replay without.
	gated := workflow.GetVersion(ctx, vendorGateChange, workflow.DefaultVersion, vendorGateVersion) == vendorGateVersion
	// Each request of a submission's attempt (a quote, every look-up, the
	// send) asks the gate itself; before, one pass covered the attempt.
	eachRequest := gated && workflow.GetVersion(ctx, vendorGateEachRequestChange, workflow.DefaultVersion, vendorGateEachRequestVersion) == vendorGateEachRequestVersion
	res, err := e.remoteSubmit(ctx, in, v, gated, eachRequest)
	if err == nil {
		e.applyPaid(i, res)
		if res.State == allot.PaidAbandoned || st.Kind == string(allot.KindEffect) {
			return nil
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Waiting for the vendor: step **%s** revision %d, task `%s`.", st.Name, st.Revision, res.RemoteRef))
		if res, err = e.remoteAwait(ctx, in, v, res.RemoteRef, gated, eachRequest); err == nil {
			e.applyPaid(i, res)
			return nil
		}
	}
	if kind := errorType(err); needsOperator(kind) {
		return e.park(ctx, i, kind, err)
	}
	return err
}

// adapterBackoff paces the attempts of a send whose outcome stayed unknown,
// and of a look-up the vendor did not answer.
func adapterBackoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 6)
	return min(d, time.Minute)
}

// remoteSubmit is SubmitPaidTask for an activity adapter: the one protocol
// loop (payonce.Drive) with the workflow as its driver.
func (e *episode) remoteSubmit(ctx workflow.Context, in activities.PaidTaskInput, v *activities.VendorActivities, gated, eachRequest bool) (activities.PaidTaskResult, error) {
	d := &workflowDriver{e: e, ctx: ctx, lctx: e.ledgerCtx(ctx), in: in, v: v, gated: gated, eachRequest: eachRequest}
	res, err := payonce.Drive(d)
	d.release()
	return res, err
}

// workflowDriver drives a paid task from the Episode workflow: each ledger
// phase is one of allot's activities, the vendor's calls are the adapter's
// activities on its task queue, and the workflow makes the next attempt
// itself (after a pause), since a retried send would be a second send.
type workflowDriver struct {
	e         *episode
	ctx, lctx workflow.Context
	in        activities.PaidTaskInput
	v         *activities.VendorActivities
	phase     activities.PaidPhaseInput // the current attempt's
	// gated: each attempt passes the vendor's gate before its intent is
	// written; pass is the attempt's, until released.
	gated bool
	pass  workflowPass
	// eachRequest: every request asks the gate right before it and is
	// released right after (docs/design.md, "Vendor controls"); the
	// admission's pass serves the first (fresh until a request used it).
	// admitted: the rate counted the attempt (its first pass).
	eachRequest, fresh, admitted bool
}

func (d *workflowDriver) Prepare(attempt int) (activities.PaidPlan, error) {
	var a *activities.Activities
	d.release()
	// Each attempt owns its intent under a name of its own; a retry is
	// another owner, which asks the vendor before it sends.
	info := workflow.GetInfo(d.ctx).WorkflowExecution
	d.phase = activities.PaidPhaseInput{PaidTaskInput: d.in, Owner: fmt.Sprintf("%s/%s/%s/r%d/%d", info.ID, info.RunID, d.in.Step, d.in.Revision, attempt)}
	if d.gated {
		pass, err := d.e.enterVendor(d.ctx, d.in, d.phase.Owner+"/send", allot.VendorSend, false, false)
		if err != nil {
			return activities.PaidPlan{}, err
		}
		d.pass, d.fresh, d.admitted = pass, pass.passed, pass.passed
	}
	var plan activities.PaidPlan
	err := d.e.call(d.lctx, d.in.Step, "PaidPrepare", a.PaidPrepare, d.phase, &plan)
	return plan, err
}

// Quote asks the adapter's quote activity for the price (again after a
// pause while it does not answer), then prepares again with it. Reached
// only from a PaidPrepare that asks for a quote, which no history recorded
// before quotes existed.
func (d *workflowDriver) Quote(plan activities.PaidPlan) (activities.PaidPlan, error) {
	var a *activities.Activities
	in := d.phase
	if d.v.Quote == "" || plan.QuoteRequest == nil {
		in.NoQuote = true
	}
	for asked := 0; !in.NoQuote && in.Quote == nil; asked++ {
		if err := d.request(); err != nil { // each quote asks the gate
			return activities.PaidPlan{}, err
		}
		var cost paidvendor.Cost
		err := workflow.ExecuteActivity(d.e.adapterCtx(d.ctx, d.v), d.v.Quote, paidvendor.ActivitySubmitRequest{
			IdempotencyKey: plan.QuoteRequest.IdempotencyKey, Kind: plan.QuoteRequest.Kind, Params: plan.QuoteRequest.Params,
		}).Get(d.ctx, &cost)
		d.answered(adapterVerdict(err)) // a failed quote counts toward the breaker
		switch {
		case err == nil:
			in.Quote = &cost
		case errorType(err) == paidvendor.ActivityErrUnauthorized:
			return activities.PaidPlan{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("vendor %s refused the credentials while quoting step %s: %v", d.v.Name, d.in.Step, err), allot.VendorNotConfigured, nil)
		default:
			if err := workflow.Sleep(d.ctx, adapterBackoff(asked)); err != nil {
				return activities.PaidPlan{}, err
			}
		}
	}
	var next activities.PaidPlan
	err := d.e.call(d.lctx, d.in.Step, "PaidPrepare", a.PaidPrepare, in, &next)
	return next, err
}

// gate makes sure the attempt passed the vendor's gate before a look-up or
// a send: Prepare's gate lets a task that waited for an earlier send's
// deadline go without a pass, and the deadline may have passed since.
func (d *workflowDriver) gate() error {
	if !d.gated || d.pass.passed {
		return nil
	}
	pass, err := d.e.enterVendor(d.ctx, d.in, d.phase.Owner+"/send", allot.VendorSend, true, false)
	if err != nil {
		return err
	}
	d.pass = pass
	return nil
}

// request passes the gate right before one request of the attempt (a
// quote, a look-up, the send), when every request asks: the admission's
// pass if it is fresh, else the gate again, so that a pause or a trip that
// came meanwhile stops it. Without eachRequest it asks nothing (the
// attempt's one pass, gate, covers it).
func (d *workflowDriver) request() error {
	if !d.eachRequest {
		return nil
	}
	if d.fresh && !d.e.stale(d.ctx, d.pass) {
		d.fresh = false
		return nil
	}
	d.fresh = false
	d.release()
	pass, err := d.e.enterVendor(d.ctx, d.in, d.phase.Owner+"/send", allot.VendorSend, true, d.admitted)
	if err != nil {
		return err
	}
	d.pass, d.admitted = pass, true
	return nil
}

// answered reports a quote's or a look-up's outcome when every request
// asks: a failure counts toward the breaker, an answer does not reset it (a
// vendor that answers them may still fail every submission); the pass is
// released at once.
func (d *workflowDriver) answered(verdict, failed bool, text string) {
	if !d.eachRequest {
		return
	}
	d.pass.observe(verdict && failed, failed, text)
	d.release()
}

// release gives back the attempt's pass, with how its requests went.
func (d *workflowDriver) release() {
	d.e.leaveVendor(d.ctx, d.in, d.pass)
	d.pass = workflowPass{}
}

func (d *workflowDriver) Lookup(plan activities.PaidPlan) (payonce.LookupOutcome, error) {
	if !d.eachRequest {
		if err := d.gate(); err != nil {
			return payonce.LookupOutcome{}, err
		}
	}
	for asked := 0; ; asked++ {
		if err := d.request(); err != nil { // each look-up asks the gate
			return payonce.LookupOutcome{}, err
		}
		out := d.e.adapterLookup(d.ctx, d.v, plan.IdempotencyKey, d.eachRequest)
		failed := out.Found == nil && !out.NotFound && !out.Unsupported && !out.Unauthorized
		if d.eachRequest {
			d.answered(true, failed, out.Error)
		} else {
			d.pass.observe(true, failed, out.Error)
		}
		if out.Found == nil && !out.NotFound && !out.Unsupported && !out.Unauthorized &&
			workflow.GetVersion(d.ctx, adapterLookupAgainChange, workflow.DefaultVersion, adapterLookupAgainVersion) == adapterLookupAgainVersion {
			// The vendor did not answer (the look-up's own retries are
			// spent): ask it again after a pause. Retrying
			// PaidAfterLookup would only repeat this non-answer.
			if err := workflow.Sleep(d.ctx, adapterBackoff(asked)); err != nil {
				return payonce.LookupOutcome{}, err
			}
			continue
		}
		return out, nil
	}
}

func (d *workflowDriver) AfterLookup(plan activities.PaidPlan, out payonce.LookupOutcome) (activities.PaidPlan, error) {
	var a *activities.Activities
	var next activities.PaidPlan
	err := d.e.call(d.lctx, d.in.Step, "PaidAfterLookup", a.PaidAfterLookup, activities.PaidAfterLookupInput{
		PaidPhaseInput: d.phase, Plan: plan, Outcome: out,
	}, &next)
	return next, err
}

func (d *workflowDriver) Wait(plan activities.PaidPlan) error {
	return workflow.Sleep(d.ctx, plan.WaitUntil.Sub(workflow.Now(d.ctx))+time.Second)
}

func (d *workflowDriver) Send(plan activities.PaidPlan) (activities.PaidTaskResult, error) {
	var a *activities.Activities
	gate := d.gate
	if d.eachRequest {
		gate = d.request
	}
	if err := gate(); err != nil {
		return activities.PaidTaskResult{}, err
	}
	var send payonce.SendRequest
	if err := d.e.call(d.lctx, d.in.Step, "PaidBeginSend", a.PaidBeginSend, activities.PaidSendInput{PaidPhaseInput: d.phase, Plan: plan}, &send); err != nil {
		return activities.PaidTaskResult{}, err
	}
	// One attempt only, bounded by the send's deadline: a second
	// attempt would be a second send.
	sctx := workflow.WithActivityOptions(d.ctx, workflow.ActivityOptions{
		TaskQueue:              d.v.TaskQueue,
		ScheduleToCloseTimeout: max(send.Until.Sub(workflow.Now(d.ctx)), time.Second),
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var reported paidvendor.ActivityTask
	out := sendOutcomeOf(workflow.ExecuteActivity(sctx, d.v.Submit, paidvendor.ActivitySubmitRequest{
		IdempotencyKey: send.Request.IdempotencyKey, Kind: send.Request.Kind, Params: send.Request.Params,
	}).Get(d.ctx, &reported), reported)
	d.pass.observe(true, out.Accepted == nil && !out.Refused, out.Error)
	if d.eachRequest {
		d.release()
	}
	// A send without an answer fails PaidAfterSend with SendUnanswered,
	// once (retrying it would only record the same non-answer again):
	// this attempt ends and the next one asks the vendor. Other failures
	// are bounded the same way (a ledger failure gets retryBatch tries;
	// after them the next attempt asks too).
	aopts := ledgerActivityOptions()
	aopts.RetryPolicy.MaximumAttempts = retryBatch
	aopts.RetryPolicy.NonRetryableErrorTypes = append(slices.Clone(aopts.RetryPolicy.NonRetryableErrorTypes), allot.SendUnanswered)
	var res activities.PaidTaskResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(d.ctx, aopts), a.PaidAfterSend, activities.PaidAfterSendInput{PaidPhaseInput: d.phase, Plan: plan, Outcome: out}).Get(d.ctx, &res)
	return res, err
}

// Again: a send without an answer (or a bookkeeping failure a retry may
// fix) is followed, after a pause, by another attempt that asks first.
func (d *workflowDriver) Again(attempt int, err error) (bool, error) {
	if err == nil || errorType(err) != allot.SendUnanswered && !retryable(err) {
		return false, nil
	}
	if err := workflow.Sleep(d.ctx, adapterBackoff(attempt)); err != nil {
		return false, err
	}
	return true, nil
}

// adapterLookup asks the adapter's lookup activity by key; an adapter
// without one cannot tell.
func (e *episode) adapterLookup(ctx workflow.Context, v *activities.VendorActivities, key string, once bool) payonce.LookupOutcome {
	if v.Lookup == "" {
		return payonce.LookupOutcome{Unsupported: true}
	}
	actx := e.adapterCtx(ctx, v)
	if once {
		// Each attempt is a request, and each request asks the gate:
		// the caller's loop makes the next one (vendor-gate-each-request).
		actx = e.adapterOnceCtx(ctx, v)
	}
	var t paidvendor.ActivityTask
	err := workflow.ExecuteActivity(actx, v.Lookup, paidvendor.ActivityLookupRequest{IdempotencyKey: key}).Get(ctx, &t)
	switch errorType(err) {
	case "":
	case paidvendor.ActivityErrNotFound:
		return payonce.LookupOutcome{NotFound: true}
	case paidvendor.ActivityErrLookupUnsupported:
		return payonce.LookupOutcome{Unsupported: true}
	case paidvendor.ActivityErrUnauthorized:
		return payonce.LookupOutcome{Unauthorized: true, Error: err.Error()}
	}
	if err != nil {
		return payonce.LookupOutcome{Error: err.Error()}
	}
	task, terr := t.Task()
	if terr != nil {
		return payonce.LookupOutcome{Error: terr.Error()}
	}
	return payonce.LookupOutcome{Found: &task}
}

func sendOutcomeOf(err error, t paidvendor.ActivityTask) payonce.SendOutcome {
	switch errorType(err) {
	case "":
	case paidvendor.ActivityErrRefused:
		return payonce.SendOutcome{Refused: true, Error: err.Error()}
	case paidvendor.ActivityErrUnauthorized:
		return payonce.SendOutcome{Refused: true, Unauthorized: true, Error: err.Error()}
	}
	if err != nil {
		return payonce.SendOutcome{Error: err.Error()}
	}
	task, terr := t.Task()
	if terr != nil {
		// An answer that cannot be read is no answer: look it up.
		return payonce.SendOutcome{Error: terr.Error()}
	}
	return payonce.SendOutcome{Accepted: &task}
}

// adapterCtx is for the adapter's look-up, status and fetch calls: on its
// queue, one call per attempt bounded by the vendor's timeout, retried.
func (e *episode) adapterCtx(ctx workflow.Context, v *activities.VendorActivities) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           v.TaskQueue,
		StartToCloseTimeout: v.CallTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: retryBatch, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: adapterFinalErrors},
	})
}

// adapterFinalErrors are the adapter's answers that no retry changes.
var adapterFinalErrors = []string{paidvendor.ActivityErrNotFound, paidvendor.ActivityErrLookupUnsupported, paidvendor.ActivityErrUnauthorized, paidvendor.ActivityErrRefused}

// adapterOnceCtx is adapterCtx with one attempt: a retry by Temporal would
// be a request that did not ask the vendor's gate (a pause or an open
// breaker that came meanwhile), so the workflow makes each retry itself,
// through the gate.
func (e *episode) adapterOnceCtx(ctx workflow.Context, v *activities.VendorActivities) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           v.TaskQueue,
		StartToCloseTimeout: v.CallTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// remoteAwait polls the adapter's status activity until the task ends,
// then fetches its result through the adapter and has allot store and
// verify it.
func (e *episode) remoteAwait(ctx workflow.Context, in activities.PaidTaskInput, v *activities.VendorActivities, remoteRef string, gated, eachRequest bool) (activities.PaidTaskResult, error) {
	var a *activities.Activities
	lctx := e.ledgerCtx(ctx)
	info := workflow.GetInfo(ctx).WorkflowExecution
	holder := fmt.Sprintf("%s/%s/%s/r%d/poll", info.ID, info.RunID, in.Step, in.Revision)
	// adapterCall is one call of the adapter, through the vendor's gate
	// when gated.
	adapterCall := func(activity string, req, out any) error {
		// request is one call of the adapter, through the vendor's gate
		// when gated.
		request := func(actx workflow.Context, call func() error) error {
			var pass workflowPass
			if gated {
				var err error
				if pass, err = e.enterVendor(ctx, in, holder, allot.VendorPoll, true, false); err != nil {
					return err
				}
			}
			err := call()
			pass.observe(adapterVerdict(err))
			e.leaveVendor(ctx, in, pass)
			return err
		}
		if !eachRequest {
			return request(ctx, func() error { return e.call(e.adapterCtx(ctx, v), in.Step, activity, activity, req, out) })
		}
		// One attempt a request, each through the gate: the retries
		// Temporal made of adapterCtx's batch (which asked no gate, so a
		// pause or an open breaker that came meanwhile let them go) are
		// made here, in batches as call makes them.
		once := e.adapterOnceCtx(ctx, v)
		return e.callBatches(ctx, in.Step, activity, func() error {
			for attempt := 0; ; attempt++ {
				err := request(once, func() error { return workflow.ExecuteActivity(once, activity, req).Get(ctx, out) })
				if err == nil || attempt+1 >= retryBatch || slices.Contains(adapterFinalErrors, errorType(err)) || !retryable(err) {
					return err
				}
				if err := workflow.Sleep(ctx, adapterBackoff(attempt)); err != nil {
					return err
				}
			}
		})
	}
	for poll := 0; ; poll++ {
		var t paidvendor.ActivityTask
		err := adapterCall(v.Status, paidvendor.ActivityTaskRequest{ID: remoteRef}, &t)
		switch {
		case err == nil:
			if workflow.GetVersion(ctx, adapterAwaitFetchChange, workflow.DefaultVersion, adapterAwaitFetchVersion) == workflow.DefaultVersion {
				// Before the change the first answered status call ended
				// the wait with an empty result (errorType(nil) is
				// "error", not ""): kept so that those histories replay.
				return activities.PaidTaskResult{}, nil
			}
		case errorType(err) == paidvendor.ActivityErrNotFound:
			return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("vendor %s has no task %q for step %s: %v", v.Name, remoteRef, in.Step, err), allot.InvalidRemoteRef, nil)
		case errorType(err) == paidvendor.ActivityErrUnauthorized:
			return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("vendor %s refused the credentials while polling task %s of step %s: %v", v.Name, remoteRef, in.Step, err), allot.VendorNotConfigured, nil)
		default:
			return activities.PaidTaskResult{}, err
		}
		var res activities.PaidTaskResult
		switch t.Status {
		case paidvendor.StatusSucceeded:
			var fetched paidvendor.ActivityFetchResult
			if err := adapterCall(v.Fetch, paidvendor.ActivityTaskRequest{ID: remoteRef}, &fetched); err != nil {
				return activities.PaidTaskResult{}, err
			}
			err := e.call(lctx, in.Step, "PaidStoreResult", a.PaidStoreResult, activities.PaidStoreResultInput{PaidTaskInput: in, Task: t, Fetch: fetched}, &res)
			return res, err
		case paidvendor.StatusFailed:
			if err := e.call(lctx, in.Step, "PaidRecordFailure", a.PaidRecordFailure, activities.PaidRecordFailureInput{PaidTaskInput: in, RemoteRef: remoteRef, Reason: t.Error}, &res); err != nil {
				return res, err
			}
			return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("vendor %s task %s for step %s failed: %s", v.Name, remoteRef, in.Step, t.Error), allot.VendorTaskFailed, nil)
		case paidvendor.StatusQueued, paidvendor.StatusRunning:
		default:
			return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("vendor %s reported task %s in status %q", v.Name, remoteRef, t.Status), allot.InvalidRemoteRef, nil)
		}
		// Polls slow down to once a minute, so a long task keeps a short
		// history.
		if err := workflow.Sleep(ctx, min(2*time.Second<<min(poll, 5), time.Minute)); err != nil {
			return activities.PaidTaskResult{}, err
		}
	}
}

// workflowPass is a request of the Episode's that the vendor's gate let
// go (PaidVendorGate): held until released, with how the vendor answered.
type workflowPass struct {
	holder  string
	passed  bool
	held    bool
	asked   time.Time // workflow time before the gate was asked (see stale)
	verdict bool      // a request was made and answered or failed
	failed  bool
	error   string
}

// observe records one request's outcome: whether it says anything of the
// vendor (a cancellation does not), and whether it failed (no answer: a
// timeout, an adapter's failure) or was answered.
func (p *workflowPass) observe(verdict, failed bool, err string) {
	if verdict {
		p.verdict, p.failed, p.error = true, failed, err
	}
}

// enterVendor asks the vendor's gate for one of the Episode's requests to
// an activity adapter; a wait is shown and waited out (call).
// tokenTaken: the rate already counted the request's attempt.
func (e *episode) enterVendor(ctx workflow.Context, in activities.PaidTaskInput, holder string, kind allot.VendorKind, always, tokenTaken bool) (workflowPass, error) {
	var a *activities.Activities
	for asked := 1; ; asked++ {
		var g activities.VendorGateResult
		p := workflowPass{holder: holder, asked: workflow.Now(ctx)}
		if err := e.call(e.ledgerCtx(ctx), in.Step, "PaidVendorGate", a.PaidVendorGate, activities.VendorGateInput{PaidTaskInput: in, Holder: holder, Kind: kind, Always: always, TokenTaken: tokenTaken}, &g); err != nil {
			return workflowPass{}, err
		}
		p.passed, p.held = g.Passed, g.Held
		// A pass that is stale already (the gate waited, or this
		// workflow task sat on a killed worker's sticky queue) is given
		// back and asked for again: the rate counted the request at the
		// first ask.
		if asked >= maxStaleAsks || !e.stale(ctx, p) {
			return p, nil
		}
		e.leaveVendor(ctx, in, p)
		tokenTaken = true
	}
}

// stalePass is how old a pass may be when the Episode makes its request:
// well within the grace after which a paused vendor must see no request
// (docs/design.md, "Vendor controls"), and far more than a healthy
// workflow task and gate take.
const stalePass = 2 * time.Second

// maxStaleAsks bounds the asks for one request: on a server so slow that
// every gate's round trip takes longer than stalePass, the request goes
// with the last pass rather than never.
const maxStaleAsks = 3

// stale reports whether a pass may be older than stalePass now. Its age is
// counted in workflow time from before the gate was asked: no worker's
// clock enters, and it may only overstate. The marker is asked for only
// then, so a history without a stale pass replays as it was.
func (e *episode) stale(ctx workflow.Context, p workflowPass) bool {
	if !p.passed || workflow.Now(ctx).Sub(p.asked) <= stalePass {
		return false
	}
	return workflow.GetVersion(ctx, stalePassChange, workflow.DefaultVersion, stalePassVersion) == stalePassVersion
}

// leaveVendor releases a held pass. A release that fails leaves the slot to
// its lease: the episode goes on.
func (e *episode) leaveVendor(ctx workflow.Context, in activities.PaidTaskInput, p workflowPass) {
	if !p.held {
		return
	}
	var a *activities.Activities
	outcome := allot.VendorNoVerdict
	if p.verdict {
		outcome = allot.VendorAnswered
		if p.failed {
			outcome = allot.VendorFailed
		}
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	opts := ledgerActivityOptions()
	opts.RetryPolicy.MaximumAttempts = retryBatch
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, opts), a.PaidVendorRelease, activities.VendorReleaseInput{
		PaidTaskInput: in, Holder: p.holder, Outcome: outcome, Error: p.error,
	}).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("releasing a vendor slot failed; it comes back when its lease expires", "step", in.Step, "error", err)
	}
}

// adapterVerdict is what an adapter's call says of the vendor: nothing
// when it was cancelled; answered when it succeeded or the adapter refused
// (not found, unauthorized); else failed.
func adapterVerdict(err error) (verdict, failed bool, text string) {
	var canceled *temporal.CanceledError
	switch {
	case err == nil:
		return true, false, ""
	case errors.As(err, &canceled) || errors.Is(err, workflow.ErrCanceled):
		return false, false, ""
	}
	switch errorType(err) {
	case paidvendor.ActivityErrNotFound, paidvendor.ActivityErrLookupUnsupported, paidvendor.ActivityErrRefused, paidvendor.ActivityErrUnauthorized:
		return true, false, ""
	}
	return true, true, rootMessage(err)
}

// runPaid submits (at most once) and awaits one paid task. Failures that
// need a person park the episode until an operator decides.
func (e *episode) runPaid(ctx workflow.Context, i int) error {
	var a *activities.Activities
	step := e.state.Steps[i]
	in := activities.PaidTaskInput{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Step: step.Name, Revision: step.Revision}
	var res activities.PaidTaskResult
	sopts := vendorActivityOptions()
	if step.Run != nil && step.Run.SendTimeout > 0 {
		// A killed sender is noticed within the heartbeat timeout and
		// retried at once: the retry waits for the send's deadline
		// anyway (SendInFlight), and then asks the vendor.
		sopts.HeartbeatTimeout = senderHeartbeat(step.Run.SendTimeout)
		sopts.RetryPolicy.InitialInterval = senderRetry
	}
	err := e.call(workflow.WithActivityOptions(ctx, sopts), step.Name, "SubmitPaidTask", a.SubmitPaidTask, in, &res)
	if err == nil {
		e.applyPaid(i, res)
		if res.State == allot.PaidAbandoned || step.Kind == string(allot.KindEffect) {
			// An effect is done once the downstream took it.
			return nil
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Waiting for the vendor: step **%s** revision %d, task `%s`.", step.Name, step.Revision, res.RemoteRef))
		err = e.call(workflow.WithActivityOptions(ctx, awaitActivityOptions()), step.Name, "AwaitPaidTask", a.AwaitPaidTask, in, &res)
		if err == nil {
			e.applyPaid(i, res)
			return nil
		}
	}
	if kind := errorType(err); needsOperator(kind) {
		return e.park(ctx, i, kind, err)
	}
	return err
}

func (e *episode) applyPaid(i int, r activities.PaidTaskResult) {
	s := &e.state.Steps[i]
	s.Status, s.TaskState, s.Revision, s.RemoteRef, s.Artifact, s.SHA256, s.Error = r.StepStatus(), r.State, r.Revision, r.RemoteRef, r.Artifact, r.SHA256, r.Error
	s.CostAmount, s.CostCurrency = r.CostAmount, r.CostCurrency
}

// waitForBudget waits, as waitIdle does, for an operator's command, and
// meanwhile asks the budgets that refused step i (read-only) whether they
// have room now: on a timer with a capped backoff, and at once when a raise
// nudges it. With room, the attention is cleared and the step runs again:
// its admission decides, and may park it again. This path is reached only
// with BudgetExhausted, which no history recorded before budgets existed.
func (e *episode) waitForBudget(ctx workflow.Context, i int, needs []allot.BudgetShortfall) error {
	var a *activities.Activities
	step := e.state.Steps[i]
	in := activities.BudgetRoomInput{PaidTaskInput: activities.PaidTaskInput{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID,
		LedgerID: e.input.LedgerID, Step: step.Name, Revision: step.Revision}, Needs: needs}
	wait := budgetRecheck
	for {
		e.idle = true
		timedOut, err := workflow.AwaitWithTimeout(ctx, wait, func() bool { return !e.busy && (e.state.Attention == nil || e.budgetNudged) })
		if err == nil {
			// A command that took its turn meanwhile finishes first.
			err = workflow.Await(ctx, func() bool { return !e.busy })
		}
		e.idle = false
		if err != nil {
			return err
		}
		if e.state.Attention == nil {
			return nil
		}
		if timedOut {
			wait = min(2*wait, budgetRecheckMax)
		}
		e.budgetNudged = false
		var room activities.BudgetRoomResult
		if err := e.callBookkeeping(ctx, step.Name, "BudgetRoom", a.BudgetRoom, in, &room); err != nil {
			return err
		}
		if room.Room {
			workflow.GetLogger(ctx).Info("the budgets have room: trying the step again", "step", step.Name)
			e.state.Attention = nil
			return nil
		}
		if e.state.Attention != nil {
			e.state.Attention.Budgets = room.Shortfalls
		}
	}
}

// Budget re-checks of a parked episode: the first after budgetRecheck,
// doubling up to budgetRecheckMax, and at once on a BudgetRaisedSignal.
const (
	budgetRecheck    = time.Minute
	budgetRecheckMax = time.Hour
)

// WaitingVendor says that a step waits for its vendor (docs/design.md,
// "Vendor controls"): paused by an operator, its breaker open, or its
// shared limits taken. The step goes on by itself.
type WaitingVendor struct {
	Step    string    `json:"step"`
	Vendor  string    `json:"vendor"`
	Reason  string    `json:"reason"` // allot.ReasonVendor*
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
	// Remedy is the step's exit when the vendor does not come back (a
	// pause or an open breaker): the complete abandon command.
	Remedy string `json:"remedy,omitempty"`
}

// vendorWaitAttempts is how many times Temporal retries an activity that
// waits for its vendor before the workflow hears of it again: each retry
// is after the delay the gate asked for (seconds while paused), and none
// adds to the history, so a long pause costs a few events an hour.
const vendorWaitAttempts = 100

// waitForVendor shows that step waits for its vendor (stage waiting_vendor,
// the reason, AllotOutcome, the current details and the ledger) and runs the
// activity again under a retry policy that keeps asking the gate, with the
// delay it gives, until the vendor takes the request; then the episode
// runs on. It returns the activity's first error that is not a wait (or
// nil), for call to handle as any other.
func (e *episode) waitForVendor(ctx workflow.Context, step string, opts workflow.ActivityOptions, activity, in, out any, err error) error {
	policy := *opts.RetryPolicy
	policy.MaximumAttempts = vendorWaitAttempts
	policy.NonRetryableErrorTypes = slices.DeleteFunc(slices.Clone(policy.NonRetryableErrorTypes), func(t string) bool { return t == allot.VendorWaiting })
	opts.RetryPolicy = &policy
	// A wait an operator ends (resolve --abandon) ends when its attempt
	// did: nothing goes to the vendor after the abandon.
	opts.WaitForCancellation = true
	wctx := workflow.WithActivityOptions(ctx, opts)
	for errorType(err) == allot.VendorWaiting {
		if serr := e.showVendorWait(ctx, step, err); serr != nil {
			return serr
		}
		err = e.awaitVendorWait(ctx, wctx, step, activity, in, out, err)
	}
	e.state.Waiting = nil
	if e.state.Stage == allot.StageWaitingVendor {
		if serr := e.setStage(ctx, allot.StageRunning); serr != nil && err == nil {
			return serr
		}
	}
	return err
}

// errWaitAbandoned ends a step that waited for its vendor when an operator
// abandoned it (resolve --abandon): the step is settled, and the episode goes
// on without it. Non-retryable, so that no retry loop takes it for a
// failure.
var errWaitAbandoned = temporal.NewNonRetryableApplicationError("the operator abandoned the step while it waited for its vendor", "WaitAbandoned", nil)

// waitStop is the handshake of resolve --abandon with a step that waits for
// its vendor: the command asks (Episode.stopWait), the main loop stops the
// waiting activity and says whether the vendor took the request meanwhile
// (took), the command applies the abandon, or refuses, and says so (done).
type waitStop struct {
	stopped, took, done, abandoned bool
}

// awaitVendorWait runs the waiting activity once (its retries ask the gate)
// and lets an operator's resolve --abandon stop it: then the activity is
// cancelled and, unless the vendor took the request meanwhile, the abandon
// is applied and the step ends with errWaitAbandoned; an abandon that fails
// goes back to waiting (waitErr).
func (e *episode) awaitVendorWait(ctx, wctx workflow.Context, step string, activity, in, out any, waitErr error) error {
	actx, cancel := workflow.WithCancel(wctx)
	fut := workflow.ExecuteActivity(actx, activity, in)
	e.waitingStep = step
	err := workflow.Await(ctx, func() bool { return fut.IsReady() || e.stopWait != nil })
	e.waitingStep = ""
	if err != nil {
		cancel()
		return err
	}
	stop := e.stopWait
	if stop == nil {
		return fut.Get(ctx, out)
	}
	e.stopWait = nil
	if !fut.IsReady() {
		cancel()
	}
	err = fut.Get(ctx, out)
	var canceled *temporal.CanceledError
	stop.stopped, stop.took = true, !errors.As(err, &canceled)
	if stop.took {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return stop.done }); err != nil {
		return err
	}
	if stop.abandoned {
		return errWaitAbandoned
	}
	return waitErr
}

// abandonWaiting is resolve --abandon of the step that waits for its
// vendor (a pause or a breaker that may never end): the wait stops, and the
// step is abandoned as a parked one is (its reservation released if it has
// no remote reference, the reason recorded). Refused if the vendor took the
// step's request before the wait stopped.
func (e *episode) abandonWaiting(ctx workflow.Context, req DecisionRequest) (EpisodeState, error) {
	stop := &waitStop{}
	e.stopWait = stop
	defer func() { stop.done = true }()
	if err := workflow.Await(ctx, func() bool { return stop.stopped }); err != nil {
		return EpisodeState{}, err
	}
	if stop.took {
		return EpisodeState{}, temporal.NewApplicationError(fmt.Sprintf("episode %s/%s: step %s stopped waiting for its vendor before the abandon came (the vendor took its request): it runs on; abandon it if it parks",
			e.input.Pipeline, e.input.EpisodeID, req.Step), allot.NotReady)
	}
	st, err := e.decide(ctx, activities.DecisionInput{Action: allot.ActionAbandon, Step: req.Step, Reason: req.Reason, By: req.By})
	stop.abandoned = err == nil
	return st, err
}

// showVendorWait puts the wait where operators look; a wait for another
// reason (a pause that became a trip) is recorded again.
func (e *episode) showVendorWait(ctx workflow.Context, step string, err error) error {
	var w activities.VendorWait
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&w)
	}
	if w.Reason == "" {
		w.Reason, w.Message = allot.ReasonVendorBusy, rootMessage(err)
	}
	prev := e.state.Waiting
	if prev != nil && prev.Reason == w.Reason && prev.Vendor == w.Vendor && prev.Step == step {
		return nil
	}
	e.state.Retrying = nil
	e.state.Waiting = &WaitingVendor{Step: step, Vendor: w.Vendor, Reason: w.Reason, Message: w.Message, Since: workflow.Now(ctx)}
	how := "It goes on by itself when the vendor takes requests again."
	switch w.Reason {
	case allot.ReasonVendorPaused:
		how = fmt.Sprintf("It goes on by itself after `%s`; `starter vendor list` shows every vendor.", allot.VendorResumeCommand(w.Vendor))
	case allot.ReasonVendorTripped:
		how = fmt.Sprintf("One probe goes after the vendor's cool_down, and the step goes on when it is answered; `%s` closes the breaker at once.", allot.VendorResumeCommand(w.Vendor))
	}
	if w.Reason == allot.ReasonVendorPaused || w.Reason == allot.ReasonVendorTripped {
		// A vendor that never comes back: the step's exit.
		e.state.Waiting.Remedy = allot.AbandonCommand(e.input.Pipeline, e.input.EpisodeID, step, "vendor "+w.Vendor+" does not come back")
		how += fmt.Sprintf(" If it does not come back: `%s`.", e.state.Waiting.Remedy)
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**Waiting for vendor %s** (%s) at step **%s**: %s\n\n%s", w.Vendor, w.Reason, step, w.Message, how))
	if e.state.Stage == allot.StageWaitingVendor {
		// Another reason at the same stage: the ledger keeps the latest.
		return e.recordOutcome(ctx, allot.OutcomeWaitingVendor, w.Reason)
	}
	return e.setStage(ctx, allot.StageWaitingVendor, w.Reason)
}
