package activities

// The vendor gate (vendor_gate.go) in the paid activities: each test names
// the promise of issue 17 it holds.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// withLimits gives the fixture's default vendor these controls.
func withLimits(t *testing.T, f *fixture, l pipeline.VendorLimits) {
	t.Helper()
	set, err := f.acts.Pipelines.WithDefaultLimits(l)
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
}

// wantWaiting asserts a VendorWaiting error: retryable, with a delay and
// the wait's reason.
func wantWaiting(t *testing.T, err error, reason string) VendorWait {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.VendorWaiting {
		t.Fatalf("got %v, want %s", err, allot.VendorWaiting)
	}
	if appErr.NonRetryable() || appErr.NextRetryDelay() <= 0 {
		t.Fatalf("%s must be retryable with a delay: %v (delay %s)", allot.VendorWaiting, err, appErr.NextRetryDelay())
	}
	var w VendorWait
	if err := appErr.Details(&w); err != nil || w.Reason != reason || w.Vendor != pipeline.DefaultVendor || w.Message == "" {
		t.Fatalf("wait %+v (%v), want reason %s", w, err, reason)
	}
	return w
}

// Issue 17 §1: a paused vendor gets no request and nothing is written (no
// intent that a later attempt would have to look up); after resume the
// task is sent once.
func TestPausedVendorGetsNothingUntilResumed(t *testing.T) {
	f := newFixture(t, nil)
	sim, creds, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "bills twice", By: "alice"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
		if w := wantWaiting(t, err, allot.ReasonVendorPaused); !w.RetryAt.After(time.Now().Add(-time.Minute)) {
			t.Fatalf("wait %+v", w)
		}
	}
	if st := sim.Stats(); st.Requests != 0 || creds.reads.Load() != 0 {
		t.Fatalf("a paused vendor got %d requests (credentials read %d times)", st.Requests, creds.reads.Load())
	}
	if tasks, err := f.led.PaidTasks(f.ctx, "tokyo", tokyoEpisode); err != nil || len(tasks) != 0 {
		t.Fatalf("paid tasks written while paused: %+v, %v", tasks, err)
	}
	if _, err := f.led.ResumeVendor(f.ctx, pipeline.DefaultVendor, time.Time{}); err != nil {
		t.Fatal(err)
	}
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil || res.State != allot.PaidSubmitted {
		t.Fatalf("after resume: %+v, %v", res, err)
	}
	if st := sim.Stats(); st.Submissions != 1 || sim.ChargeCount() != 1 {
		t.Fatalf("after resume: %+v, %d charges", st, sim.ChargeCount())
	}
	// A pause of sends lets the await poll; a pause of polls stops it.
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "maintenance", Polls: true}); err != nil {
		t.Fatal(err)
	}
	requests := sim.Stats().Requests
	_, err = execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask)
	wantWaiting(t, err, allot.ReasonVendorPaused)
	if sim.Stats().Requests != requests {
		t.Fatal("a pause of polls let a poll through")
	}
	// A second pause never narrows the first: resume, then pause sends.
	if _, err := f.led.ResumeVendor(f.ctx, pipeline.DefaultVendor, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	if res, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask); err != nil || res.State != allot.PaidSucceeded {
		t.Fatalf("await under a pause of sends only: %+v, %v", res, err)
	}
}

// Issue 17 §2: consecutive failures (5xx, unreachable) trip the breaker,
// with the last error as its reason; refusals of one task (4xx) do not
// count; while it is open nothing reaches the vendor.
func TestBreakerTripsOnFailuresNotRefusals(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	withLimits(t, f, pipeline.VendorLimits{TripAfter: 2, CoolDown: "1h"})
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	// A refused key (401) is the vendor answering: no count.
	good := f.acts.Credentials
	f.acts.Credentials = paidvendor.NewStaticCredentials("wrong-key")
	for range 3 {
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
		wantAppError(t, err, allot.VendorNotConfigured)
	}
	if s, _ := f.led.VendorStateOf(f.ctx, pipeline.DefaultVendor, time.Time{}); s.Failures != 0 || s.Tripped() {
		t.Fatalf("refusals counted for the breaker: %+v", s)
	}
	f.acts.Credentials = good
	f.decideRetry(t)
	// 503s before accepting: failures.
	if err := sim.SetFaults(paidvendortest.SimFaults{FailBeforeAccept: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err == nil {
			t.Fatal("a 503 was reported as success")
		}
	}
	s, err := f.led.VendorStateOf(f.ctx, pipeline.DefaultVendor, time.Time{})
	if err != nil || !s.Tripped() || s.Failures != 2 || s.Status() != "tripped" {
		t.Fatalf("after two 503s: %+v, %v", s, err)
	}
	requests := sim.Stats().Requests
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	w := wantWaiting(t, err, allot.ReasonVendorTripped)
	if sim.Stats().Requests != requests || !w.RetryAt.After(time.Now().Add(50*time.Minute)) {
		t.Fatalf("while open: %d requests more, wait %+v", sim.Stats().Requests-requests, w)
	}
	// An operator's resume closes it at once; the task is looked up first
	// (its sends may have reached the vendor) and sent once.
	if err := sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.ResumeVendor(f.ctx, pipeline.DefaultVendor, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
		t.Fatalf("after resume: %+v, %v, %d charges", res, err, sim.ChargeCount())
	}
}

// decideRetry lets the parked (refused) video step run again.
func (f *fixture) decideRetry(t *testing.T) {
	t.Helper()
	if _, err := f.decide(t, DecisionInput{RequestID: "retry-1", Action: allot.ActionRetry, Step: "video"}); err != nil {
		t.Fatal(err)
	}
}

// Issue 17 §3: with max_in_flight, a request waits while the slots are
// taken, and a slot whose holder was killed (it never gives it back) comes
// back when its lease expires.
func TestKilledHoldersSlotComesBack(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	withLimits(t, f, pipeline.VendorLimits{MaxInFlight: 1})
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	// A worker took the only slot 9 s ago for a 10 s lease, and died.
	if g, err := f.led.AcquireVendor(f.ctx, ledger.VendorRequest{Vendor: pipeline.DefaultVendor, Holder: "killed-worker", Kind: ledger.VendorSend,
		Limits: ledger.VendorLimits{MaxInFlight: 1}, Lease: 10 * time.Second, At: time.Now().Add(-9 * time.Second)}); err != nil || !g.Granted {
		t.Fatalf("%+v, %v", g, err)
	}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	wantWaiting(t, err, allot.ReasonVendorBusy)
	if sim.Stats().Requests != 0 {
		t.Fatal("a request went while the only slot was held")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
		if err == nil {
			if res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
				t.Fatalf("%+v, %d charges", res, sim.ChargeCount())
			}
			break
		}
		wantWaiting(t, err, allot.ReasonVendorBusy)
		if time.Now().After(deadline) {
			t.Fatal("the killed holder's slot never came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The attempt gave its slot back: nothing stays in flight.
	if s, err := f.led.VendorStateOf(f.ctx, pipeline.DefaultVendor, time.Time{}); err != nil || s.InFlightSend+s.InFlightPoll != 0 {
		t.Fatalf("after the send: %+v, %v", s, err)
	}
}

// Issue 17 §4: an unknown outcome older than the vendor's idempotency
// horizon is never looked up and then sent again: the vendor's "nothing"
// may mean it forgot the key. Within the horizon the same task is sent.
func TestPastTheHorizonAnUnknownOutcomeParks(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"within", 30 * time.Minute, ""},
		{"past", 2 * time.Hour, allot.IdempotencyHorizonPassed},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			sim, _, _ := withVendor(t, f)
			withLimits(t, f, pipeline.VendorLimits{IdempotencyHorizon: "1h"})
			f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
			// A send began and its worker died before the vendor saw it.
			key := allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0)
			if _, err := f.led.WriteIntent(f.ctx, videoRef(), key, "dead-attempt"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.led.MarkSending(f.ctx, videoRef(), "dead-attempt", time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(c.after)
			clock = func() time.Time { return later }
			t.Cleanup(func() { clock = time.Now })
			res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
			if c.want == "" {
				if err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
					t.Fatalf("within the horizon: %+v, %v", res, err)
				}
				return
			}
			appErr := wantAppError(t, err, c.want)
			if sim.Stats().Submissions != 0 || sim.ChargeCount() != 0 {
				t.Fatalf("past the horizon something was sent: %+v", sim.Stats())
			}
			var d ParkDetails
			if appErr.Details(&d) != nil || d.TaskState != allot.PaidIntent || f.task(t).State != allot.PaidIntent {
				t.Fatalf("parked on %+v", d)
			}
			if got := allot.PaidActionsAllowed(allot.PaidIntent, c.want); fmt.Sprint(got) != "[adopt resubmit abandon]" {
				t.Fatalf("exits %v", got)
			}
			// An operator who checked the vendor resubmits: it is sent.
			if _, err := f.decide(t, DecisionInput{RequestID: "resubmit-1", Action: allot.ActionResubmit, Step: "video"}); err != nil {
				t.Fatal(err)
			}
			if res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
				t.Fatalf("after resubmit: %+v, %v", res, err)
			}
		})
	}
}

// Issue 24: the horizon counts from the first send, not from when the task
// was written. A task written days ago (it waited on its budget) and sent
// for the first time just now is not parked when the vendor's look-up
// finds nothing: the vendor cannot have forgotten a key it got a second
// ago. It is sent, once.
func TestTheHorizonCountsFromTheFirstSend(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	withLimits(t, f, pipeline.VendorLimits{IdempotencyHorizon: "1h"})
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	key := allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0)
	if _, err := f.led.WriteIntent(f.ctx, videoRef(), key, "dead-attempt"); err != nil {
		t.Fatal(err)
	}
	// Written three days ago; its first send began just now, and its
	// worker died before the vendor saw it.
	rawSQL(t, f, `UPDATE paid_tasks SET created_at = ? WHERE pipeline = 'tokyo' AND step = 'video'`,
		time.Now().Add(-72*time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	sent, err := f.led.MarkSending(f.ctx, videoRef(), "dead-attempt", time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if sent.FirstSentAt.IsZero() || time.Since(sent.CreatedAt) < 71*time.Hour {
		t.Fatalf("the task: %+v", sent)
	}
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
		t.Fatalf("a task first sent a second ago was not sent: %+v, %v", res, err)
	}
}

// What a request's error says of the vendor, for the breaker.
func TestVendorOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want ledger.VendorOutcome
	}{
		{nil, ledger.VendorAnswered},
		{&paidvendor.HTTPError{StatusCode: http.StatusServiceUnavailable}, ledger.VendorFailed},
		{&paidvendor.HTTPError{StatusCode: http.StatusBadGateway}, ledger.VendorFailed},
		{&paidvendor.HTTPError{StatusCode: http.StatusNotImplemented}, ledger.VendorAnswered},
		{&paidvendor.HTTPError{StatusCode: http.StatusBadRequest}, ledger.VendorAnswered},
		{&paidvendor.HTTPError{StatusCode: http.StatusTooManyRequests}, ledger.VendorNoVerdict},
		{&paidvendor.TransportError{Op: "submit", Err: errors.New("EOF")}, ledger.VendorFailed},
		{fmt.Errorf("x: %w", paidvendor.ErrNotFound), ledger.VendorAnswered},
		{fmt.Errorf("x: %w", paidvendor.ErrBadResponse), ledger.VendorFailed},
		{fmt.Errorf("x: %w", paidvendor.ErrInvalidRequest), ledger.VendorNoVerdict},
		{context.DeadlineExceeded, ledger.VendorFailed},
		{context.Canceled, ledger.VendorNoVerdict},
	} {
		if got := vendorOutcome(c.err); got != c.want {
			t.Errorf("vendorOutcome(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// A look-up or a send never goes without the gate's pass, even when the
// attempt's start let it go without one (its task waited for an earlier
// send's deadline, which passed meanwhile).
func TestLookupAndSendAskTheGateWithoutAPass(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	key := allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0)
	task, err := f.led.WriteIntent(f.ctx, videoRef(), key, "attempt-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "bills twice"}); err != nil {
		t.Fatal(err)
	}
	d := &activityDriver{a: f.acts, ctx: f.ctx, in: videoTask, phase: PaidPhaseInput{PaidTaskInput: videoTask, Owner: "attempt-1"}}
	plan := PaidPlan{Next: payonce.NextSend, IdempotencyKey: key, Seen: task}
	_, err = d.Send(plan)
	wantWaiting(t, err, allot.ReasonVendorPaused)
	_, err = d.Lookup(plan)
	wantWaiting(t, err, allot.ReasonVendorPaused)
	if sim.Stats().Requests != 0 || f.task(t).MaybeSent {
		t.Fatalf("a request went without a pass: %+v, %+v", sim.Stats(), f.task(t))
	}
}

// An attempt that finds an earlier send's deadline near waits for it in
// the activity and then asks the vendor, instead of ending to be scheduled
// again later (a killed sender's task settles sooner).
func TestNearSendDeadlineIsWaitedInTheAttempt(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	key := allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0)
	if _, err := f.led.WriteIntent(f.ctx, videoRef(), key, "killed-attempt"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.MarkSending(f.ctx, videoRef(), "killed-attempt", time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
		t.Fatalf("%+v, %v, %d charges", res, err, sim.ChargeCount())
	}
	// A far deadline still ends the attempt with SendInFlight.
	f2 := newFixture(t, nil)
	withVendor(t, f2)
	f2.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := f2.led.WriteIntent(f2.ctx, videoRef(), key, "killed-attempt"); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.led.MarkSending(f2.ctx, videoRef(), "killed-attempt", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err = execute[PaidTaskResult](t, f2, f2.acts.SubmitPaidTask, videoTask)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.SendInFlight {
		t.Fatalf("far deadline: %v", err)
	}
}

// Issue 17 §1: a send in flight when the pause comes is an unknown outcome
// as any other: nothing asks or sends while the vendor is paused, and after
// resume the vendor is asked by key first and its task adopted (one
// charge).
func TestSendInFlightAtThePauseIsLookedUpAfterResume(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	// The send reaches the vendor; its answer is lost as the pause comes.
	if err := sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err == nil {
		t.Fatal("a lost answer was reported as success")
	}
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "bills twice"}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if !f.task(t).OutcomeUnknown() {
		t.Fatalf("task %+v", f.task(t))
	}
	requests := sim.Stats().Requests
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	wantWaiting(t, err, allot.ReasonVendorPaused)
	if sim.Stats().Requests != requests {
		t.Fatal("the paused vendor was asked")
	}
	if _, err := f.led.ResumeVendor(f.ctx, pipeline.DefaultVendor, time.Time{}); err != nil {
		t.Fatal(err)
	}
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil || res.State != allot.PaidSubmitted || res.RemoteRef != sim.Charges()[0].TaskID {
		t.Fatalf("after resume: %+v, %v", res, err)
	}
	if st := sim.Stats(); st.Submissions != 1 || sim.ChargeCount() != 1 {
		t.Fatalf("after resume the task was sent again: %+v", st)
	}
}

// failingQuoter is a Go adapter whose quotes never get an answer (the
// vendor is unreachable); it counts every request it is asked.
type failingQuoter struct{ quotes, others atomic.Int32 }

func (q *failingQuoter) Quote(context.Context, paidvendor.SubmitRequest) (paidvendor.Cost, error) {
	q.quotes.Add(1)
	return paidvendor.Cost{}, errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
}

func (q *failingQuoter) Submit(context.Context, paidvendor.SubmitRequest) (paidvendor.Task, error) {
	q.others.Add(1)
	return paidvendor.Task{}, errors.New("not reached")
}

func (q *failingQuoter) LookupByIdempotencyKey(context.Context, string) (paidvendor.Task, error) {
	q.others.Add(1)
	return paidvendor.Task{}, paidvendor.ErrNotFound
}

// Issue 24 §1: a quote that fails counts toward the breaker like any
// failed request: with trip_after = 2, six attempts at a vendor whose
// quotes go unanswered make two quotes, then wait for the open breaker.
func TestFailedQuotesTripTheBreaker(t *testing.T) {
	f := newBudgetFixture(t, true)
	set, err := pipeline.Parse([]byte(strings.Replace(budgetPipelines, "adapter = \"go\"\n", "adapter = \"go\"\ntrip_after = 2\ncool_down = \"1h\"\n", 1)), "vendor_gate_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	q := &failingQuoter{}
	f.acts.Vendors = map[string]Vendor{"quoter": {New: func(string) (paidvendor.Submitter, error) { return q, nil }}}
	ep := f.mustAllocate(t, "tokyo", "run-1", tokyoNominal).EpisodeID
	waits := 0
	for range 6 {
		_, err := f.submit(t, ep, "cover")
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == allot.VendorWaiting {
			waits++
			continue
		}
		if err == nil {
			t.Fatal("an unanswered quote was reported as success")
		}
	}
	s, err := f.led.VendorStateOf(f.ctx, "quoter", time.Time{})
	if err != nil || !s.Tripped() || q.quotes.Load() != 2 || waits != 4 || q.others.Load() != 0 {
		t.Fatalf("after six attempts: %d quotes, %d other requests, %d waits; vendor %+v, %v", q.quotes.Load(), q.others.Load(), waits, s, err)
	}
}

// slowPolls is the vendor's client whose status polls wait until the test
// lets them answer.
type slowPolls struct {
	paidvendor.Client
	entered chan struct{}
	release chan struct{}
}

func (s slowPolls) Task(ctx context.Context, id string) (paidvendor.Task, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Client.Task(ctx, id)
}

// Issue 24 §1: a poll that takes longer than its slot's lease keeps the
// slot (the lease is renewed while it runs), and max_in_flight holds
// meanwhile: another request waits.
func TestSlowPollKeepsItsSlot(t *testing.T) {
	f := newFixture(t, nil)
	withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil {
		t.Fatal(err)
	}
	withLimits(t, f, pipeline.VendorLimits{MaxInFlight: 1})
	lease := pollLease
	pollLease = 300 * time.Millisecond
	t.Cleanup(func() { pollLease = lease })
	slow := slowPolls{entered: make(chan struct{}, 1), release: make(chan struct{})}
	build := f.acts.NewVendor
	f.acts.NewVendor = func(key string) (paidvendor.Client, error) {
		c, err := build(key)
		slow.Client = c
		return slow, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask)
		done <- err
	}()
	<-slow.entered
	polling := time.Now()
	// The slot is still held past twice its first lease: renewed. Waits on
	// the ledger (a renewal comes every half lease), not on a timer.
	for deadline := time.Now().Add(10 * time.Second); ; {
		s, err := f.led.VendorStateOf(f.ctx, pipeline.DefaultVendor, polling.Add(2*pollLease))
		if err != nil {
			t.Fatal(err)
		}
		if s.InFlightPoll == 1 {
			break
		}
		if time.Now().After(deadline) {
			close(slow.release)
			t.Fatalf("the slow poll's slot was not renewed: it expires with its first lease (%+v)", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its first lease has expired by now; the slot is still taken, so a
	// second request waits.
	_, err := f.acts.enterVendor(f.ctx, pipeline.DefaultVendor, ledger.VendorPoll, "another-request")
	wantWaiting(t, err, allot.ReasonVendorBusy)
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, _ := f.led.VendorStateOf(f.ctx, pipeline.DefaultVendor, time.Time{}); s.InFlightPoll != 0 {
		t.Fatalf("the slot was not given back: %+v", s)
	}
}
