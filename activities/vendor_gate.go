package activities

// The vendor gate (docs/design.md, "Vendor controls"): every request a paid
// activity makes to a vendor first asks the ledger whether it may go (an
// operator's pause, the breaker, the vendor's max_in_flight slots and rate
// tokens, shared by every worker), and afterwards tells it how the request
// went (the breaker's count, the slot back). A request that may not go is
// never made: the activity ends with the retryable VendorWaiting, whose next
// retry delay says when to ask again, before anything that could send is
// written, and the Episode shows the wait (waiting_vendor) without holding
// a worker slot.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// gateLogger is the activity's logger, or slog's outside an activity.
func gateLogger(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}

// clock is the time the idempotency horizon is measured at; tests move it.
var clock = time.Now

// VendorWait is the detail of a VendorWaiting error: which vendor, why
// (allot.ReasonVendor*), in words, and when it is asked again.
type VendorWait struct {
	Vendor  string    `json:"vendor"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// Leases of a request's slot: a killed holder's slot comes back when its
// lease expires. A send's covers the send's deadline and a margin; a poll's
// (look-up, status, download) is renewed while the request runs (a var:
// tests shorten it).
const sendLeaseMargin = 5 * time.Second

var pollLease = 15 * time.Second

// vendorOf names the vendor of a paid or effect step ("default" for the
// worker's ALLOT_VENDOR_URL).
func vendorOf(st pipeline.Step) string {
	if st.Vendor == "" {
		return pipeline.DefaultVendor
	}
	return st.Vendor
}

// vendorLimits are the vendor's controls as the ledger applies them.
func (a *Activities) vendorLimits(vendor string) pipeline.VendorLimits {
	if a.Pipelines == nil {
		return pipeline.VendorLimits{}
	}
	return a.Pipelines.Limits(vendor)
}

func gateLimits(l pipeline.VendorLimits) ledger.VendorLimits {
	out := ledger.VendorLimits{MaxInFlight: l.MaxInFlight, Rate: l.Rate, TripAfter: l.TripAfter, CoolDown: l.CoolDownDuration()}
	if l.Rate > 0 {
		out.Burst = l.BurstSize()
	}
	return out
}

// sendTimeout bounds one submission to the vendor (its send_timeout).
func (a *Activities) sendTimeout(vendor string) time.Duration {
	return a.vendorLimits(vendor).SendTimeoutDuration()
}

// vendorPass is one granted request (or several in a row, by one holder)
// at a vendor: it keeps its slot's lease alive while it runs, and leave
// reports how the requests went and gives the slot back.
type vendorPass struct {
	a      *Activities
	vendor string
	limits pipeline.VendorLimits
	holder string
	grant  ledger.VendorGrant
	lease  time.Duration

	mu      sync.Mutex
	outcome ledger.VendorOutcome
	errText string
	stop    context.CancelFunc
	renewed chan struct{}
}

// enterVendor asks the ledger whether holder's request of kind may go to
// vendor now. If not, the error is VendorWaiting (retryable, with the delay
// until it is worth asking again).
func (a *Activities) enterVendor(ctx context.Context, vendor string, kind ledger.VendorKind, holder string) (*vendorPass, error) {
	return a.enterVendorOf(ctx, vendor, kind, holder, false)
}

// enterVendorOf is enterVendor for a request of an attempt the rate
// already counted (tokenTaken: an earlier request of the attempt took its
// token; this one asks for the pause, the breaker and a slot only).
func (a *Activities) enterVendorOf(ctx context.Context, vendor string, kind ledger.VendorKind, holder string, tokenTaken bool) (*vendorPass, error) {
	lease := pollLease
	if kind == ledger.VendorSend {
		lease = a.sendTimeout(vendor) + sendLeaseMargin
	}
	p, err := a.enterVendorFor(ctx, vendor, kind, holder, lease, tokenTaken)
	if err == nil && p.grant.Held && (p.limits.MaxInFlight > 0 || p.grant.Probe) {
		p.renew(ctx) // a request longer than its lease keeps its slot
	}
	return p, err
}

// enterVendorFor is enterVendorOf with the lease given, and nothing that
// renews it.
func (a *Activities) enterVendorFor(ctx context.Context, vendor string, kind ledger.VendorKind, holder string, lease time.Duration, tokenTaken bool) (*vendorPass, error) {
	limits := a.vendorLimits(vendor)
	asked := gateLimits(limits)
	if tokenTaken {
		asked.Rate, asked.Burst = 0, 0
	}
	grant, err := a.Ledger.AcquireVendor(ctx, ledger.VendorRequest{Vendor: vendor, Holder: holder, Kind: kind, Limits: asked, Lease: lease})
	if err != nil {
		return nil, classify(err)
	}
	if !grant.Granted {
		return nil, vendorWaiting(ctx, vendor, grant)
	}
	return &vendorPass{a: a, vendor: vendor, limits: limits, holder: holder, grant: grant, lease: lease, outcome: ledger.VendorNoVerdict}, nil
}

// renew keeps the lease alive while the pass is held: a slow look-up or
// download outlives its first lease, a killed one does not.
func (p *vendorPass) renew(ctx context.Context) {
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop, p.renewed = stop, make(chan struct{})
	go func() {
		defer close(p.renewed)
		t := time.NewTicker(p.lease / 2)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if err := p.a.Ledger.RenewVendorLease(rctx, p.vendor, p.holder, time.Now().Add(p.lease)); err != nil && rctx.Err() == nil {
					gateLogger(ctx).Warn("renewing a vendor slot failed; it expires at its lease", "vendor", p.vendor, "error", err)
				}
			}
		}
	}()
}

// observe records how a request of the pass went: the last one decides
// the breaker's count.
func (p *vendorPass) observe(err error) {
	if p == nil {
		return
	}
	out := vendorOutcome(err)
	p.mu.Lock()
	defer p.mu.Unlock()
	if out == ledger.VendorNoVerdict {
		return
	}
	p.outcome, p.errText = out, ""
	if err != nil {
		p.errText = err.Error()
	}
}

// observeFailure records the outcome of a request that comes before a
// send (a quote, a look-up by key) only if it failed: it counts toward the
// breaker like any failed request, but its answer does not reset the count,
// since a vendor that answers them may still fail every submission
// (docs/design.md, "Vendor controls").
func (p *vendorPass) observeFailure(err error) {
	if vendorOutcome(err) == ledger.VendorFailed {
		p.observe(err)
	}
}

// leave ends the pass: the renewal stops, the slot (and a probe) is given
// back and the outcome counted. It runs after the activity's context may be
// cancelled; a failure to write only leaves the slot to its lease.
func (p *vendorPass) leave(ctx context.Context) {
	if p == nil {
		return
	}
	if p.stop != nil {
		p.stop()
		<-p.renewed
	}
	if !p.grant.Held {
		return
	}
	p.mu.Lock()
	rel := ledger.VendorRelease{Vendor: p.vendor, Holder: p.holder, Outcome: p.outcome, Error: p.errText, Limits: gateLimits(p.limits)}
	p.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := p.a.Ledger.ReleaseVendor(rctx, rel)
	if err != nil {
		gateLogger(ctx).Warn("releasing a vendor slot failed; it comes back when its lease expires", "vendor", p.vendor, "error", err)
		return
	}
	if s.Tripped() && rel.Outcome == ledger.VendorFailed {
		gateLogger(ctx).Warn("vendor breaker open", "vendor", p.vendor, "failures", s.Failures, "reason", s.Reason())
	}
}

// vendorOutcome says what a request's error says about the vendor: an
// answer (any 2xx or 4xx, a task or key it does not have, no look-up) means
// it is up; no answer (unreachable, a timeout, a 5xx, a body that is not
// the API's) is a failure for the breaker; a 429 or our own cancellation
// says neither.
func vendorOutcome(err error) ledger.VendorOutcome {
	var he *paidvendor.HTTPError
	switch {
	case err == nil:
		return ledger.VendorAnswered
	case errors.Is(err, context.Canceled):
		return ledger.VendorNoVerdict
	case errors.As(err, &he):
		switch {
		case he.StatusCode == http.StatusTooManyRequests:
			return ledger.VendorNoVerdict
		case he.StatusCode >= 500 && he.StatusCode != http.StatusNotImplemented:
			return ledger.VendorFailed
		}
		return ledger.VendorAnswered
	case errors.Is(err, paidvendor.ErrNotFound), errors.Is(err, paidvendor.ErrLookupUnsupported), errors.Is(err, paidvendor.ErrUnauthorized),
		errors.Is(err, paidvendor.ErrIdempotencyConflict), errors.Is(err, paidvendor.ErrNoResult):
		return ledger.VendorAnswered
	case errors.Is(err, paidvendor.ErrInvalidRequest), errors.Is(err, paidvendor.ErrInvalidTaskID):
		// Refused before it was sent (or a Go adapter's refusal): says
		// nothing of the vendor.
		return ledger.VendorNoVerdict
	}
	// Transport errors, deadlines, a bad response, or a Go adapter's own
	// failure: the vendor did not answer as it should.
	return ledger.VendorFailed
}

// vendorWaiting is the retryable error of a request that may not go now.
// Its next retry delay: a paused vendor is asked again within seconds (a
// resume is seen soon); an open breaker at its cool-down's end; a slot or a
// token soon, backing off with the attempts and spread so that waiting
// attempts do not all ask at once.
func vendorWaiting(ctx context.Context, vendor string, g ledger.VendorGrant) error {
	w := VendorWait{Vendor: vendor, Reason: string(g.Wait), Message: g.Reason, RetryAt: g.RetryAt}
	until := time.Until(g.RetryAt)
	var delay time.Duration
	switch g.Wait {
	case ledger.WaitBusy:
		attempt := int32(1)
		if activity.IsActivity(ctx) {
			attempt = max(activity.GetInfo(ctx).Attempt, 1)
		}
		delay = min(200*time.Millisecond<<min(attempt-1, 4), 2*time.Second)
		delay = delay/2 + rand.N(delay)
	case ledger.WaitRate:
		delay = until + rand.N(50*time.Millisecond)
	case ledger.WaitTripped:
		delay = until + rand.N(time.Second)
	default:
		delay = until
	}
	delay = min(max(delay, 100*time.Millisecond), time.Minute)
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s; nothing was sent, asking again in %s", g.Reason, delay.Round(time.Millisecond)),
		allot.VendorWaiting, temporal.ApplicationErrorOptions{NextRetryDelay: delay, Details: []any{w}, Category: waitCategory})
}

// awaitVendor is enterVendor for a request inside a long activity (a poll
// of AwaitPaidTask): a wait for a slot or a token is waited out here,
// heartbeating, as the poll's own pause is; a pause or an open breaker ends
// the activity with VendorWaiting, so that the Episode shows it.
func (a *Activities) awaitVendor(ctx context.Context, vendor string, kind ledger.VendorKind, holder string) (*vendorPass, error) {
	for {
		p, err := a.enterVendor(ctx, vendor, kind, holder)
		var appErr *temporal.ApplicationError
		if err == nil || !errors.As(err, &appErr) || appErr.Type() != allot.VendorWaiting {
			return p, err
		}
		var w VendorWait
		if appErr.Details(&w) != nil || (w.Reason != string(ledger.WaitBusy) && w.Reason != string(ledger.WaitRate)) {
			return nil, err
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, "waiting for a slot of vendor "+vendor)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250*time.Millisecond + rand.N(250*time.Millisecond)):
		}
	}
}

// vendorGateOf is the gate of one activity's polls: one holder, one
// request at a time.
type vendorGateOf struct {
	a      *Activities
	vendor string
	holder string
}

func (g vendorGateOf) enter(ctx context.Context) (*vendorPass, error) {
	return g.a.awaitVendor(ctx, g.vendor, ledger.VendorPoll, g.holder)
}

// VendorGateInput asks the gate for a request of an activity adapter's
// paid task, which the Episode makes (the adapter's activities): Holder
// names the request, Kind says what it is.
type VendorGateInput struct {
	PaidTaskInput
	Holder string            `json:"holder"`
	Kind   ledger.VendorKind `json:"kind"`
	// Always asks the gate for a send even when the task looks done or
	// waiting (a look-up or send that follows needs the pass).
	Always bool `json:"always,omitempty"`
	// TokenTaken: a request of an attempt the rate already counted (an
	// earlier request took its token); it asks for the pause, the breaker
	// and a slot only.
	TokenTaken bool `json:"token_taken,omitempty"`
}

// VendorGateResult is a granted request: Held says a slot, a probe or a
// breaker count waits for PaidVendorRelease.
type VendorGateResult struct {
	Held bool `json:"held,omitempty"`
	// Passed: the gate was asked and let the request go (false when a
	// send needed no pass: the task was done or waiting).
	Passed bool `json:"passed,omitempty"`
}

// PaidVendorGate is the vendor gate for the Episode's own requests to an
// activity adapter: a send needs one unless the task is done or waits for
// an earlier send; a look-up, status or fetch (kind poll) always asks. It
// fails with VendorWaiting when the request may not go now. The lease
// covers the adapter's call with its retries, since the workflow cannot
// renew it.
func (a *Activities) PaidVendorGate(ctx context.Context, in VendorGateInput) (VendorGateResult, error) {
	_, _, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return VendorGateResult{}, err
	}
	if in.Holder == "" {
		return VendorGateResult{}, nonRetryable(allot.InvalidInput, "the vendor gate of step %s needs the request's holder", st.Name)
	}
	if in.Kind == ledger.VendorSend && !in.Always {
		task, err := a.Ledger.PaidTask(ctx, in.ref())
		switch {
		case errors.Is(err, ledger.ErrPaidTaskNotFound):
		case err != nil:
			return VendorGateResult{}, classify(err)
		case task.State != allot.PaidPlanned && task.State != allot.PaidIntent,
			task.MaybeSent && time.Now().Before(task.SendingUntil):
			return VendorGateResult{}, nil
		}
	}
	vendor := vendorOf(st)
	call := pipeline.DefaultVendorTimeout
	if v, ok := a.Pipelines.Vendor(vendor); ok {
		call = v.CallTimeout()
	}
	// The adapter's call: a batch of attempts with their backoff.
	lease := 4*call + 10*time.Second + sendLeaseMargin
	if in.Kind == ledger.VendorSend {
		lease = max(lease, a.sendTimeout(vendor)+sendLeaseMargin)
	}
	p, err := a.enterVendorFor(ctx, vendor, in.Kind, in.Holder, lease, in.TokenTaken)
	if err != nil {
		return VendorGateResult{}, err
	}
	return VendorGateResult{Held: p.grant.Held, Passed: true}, nil
}

// VendorReleaseInput ends a request PaidVendorGate granted, with what the
// vendor's answer said of it.
type VendorReleaseInput struct {
	PaidTaskInput
	Holder  string               `json:"holder"`
	Outcome ledger.VendorOutcome `json:"outcome"`
	Error   string               `json:"error,omitempty"`
}

// PaidVendorRelease gives back the slot (and a probe) of an activity
// adapter's request and counts its outcome for the breaker.
func (a *Activities) PaidVendorRelease(ctx context.Context, in VendorReleaseInput) error {
	_, _, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return err
	}
	switch in.Outcome {
	case ledger.VendorAnswered, ledger.VendorFailed, ledger.VendorNoVerdict:
	default:
		return nonRetryable(allot.InvalidInput, "vendor release of step %s: outcome %q is none of answered, failed, none", st.Name, in.Outcome)
	}
	vendor := vendorOf(st)
	_, err = a.Ledger.ReleaseVendor(ctx, ledger.VendorRelease{Vendor: vendor, Holder: in.Holder, Outcome: in.Outcome, Error: in.Error, Limits: gateLimits(a.vendorLimits(vendor))})
	return classify(err)
}
