package activities

// Tests of the paid protocol's exits and refusals (issue 7): each names the
// defect it guards against.

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

var videoTask = PaidTaskInput{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: "video"}

func videoRef() ledger.PaidTaskRef {
	return ledger.PaidTaskRef{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: "video"}
}

func (f *fixture) decide(t *testing.T, req DecisionInput) (DecisionResult, error) {
	t.Helper()
	req.Pipeline, req.EpisodeID = "tokyo", tokyoEpisode
	return execute[DecisionResult](t, f, f.acts.ApplyDecision, req)
}

func (f *fixture) task(t *testing.T) ledger.PaidTask {
	t.Helper()
	task, err := f.led.LatestPaidTask(f.ctx, "tokyo", tokyoEpisode, "video")
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func (f *fixture) decisions(t *testing.T) []ledger.OperatorDecision {
	t.Helper()
	ds, err := f.led.Decisions(f.ctx, "tokyo", tokyoEpisode)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// unknownOutcome leaves the video task an intent whose send reached the
// vendor (accepted and charged) while its answer was lost, on a vendor that
// cannot look tasks up: the outcome is unknown.
func unknownOutcome(t *testing.T, f *fixture, sim *paidvendortest.Simulator) {
	t.Helper()
	if err := sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err == nil {
		t.Fatal("a lost response was reported as success")
	}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	wantAppError(t, err, allot.OutcomeUnknown)
	if err := sim.SetFaults(paidvendortest.SimFaults{NoLookup: true}); err != nil {
		t.Fatal(err)
	}
}

// Defect: a refused decision retried forever and blocked the episode. Every
// ledger refusal is a named non-retryable type, and changes nothing.
func TestRefusedDecisionIsNonRetryableAndChangesNothing(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	unknownOutcome(t, f, sim)
	before := f.task(t)

	_, err := f.decide(t, DecisionInput{RequestID: "rework-1", Action: allot.ActionRework, Step: "video"})
	wantAppError(t, err, allot.PaidTaskStateConflict)
	if after := f.task(t); after != before {
		t.Fatalf("a refused rework changed the task:\n%+v\n%+v", before, after)
	}
	if ds := f.decisions(t); len(ds) != 0 {
		t.Fatalf("a refused rework was recorded: %+v", ds)
	}
	// The right command, sent next, works.
	ref := sim.Charges()[0].TaskID
	res, err := f.decide(t, DecisionInput{RequestID: "adopt-1", Action: allot.ActionAdopt, Step: "video", RemoteRef: ref})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps[1].Status != allot.StepSubmitted || res.Steps[1].RemoteRef != ref {
		t.Fatalf("after adopt: %+v", res.Steps[1])
	}
}

// Defect: a retried adopt failed after it took effect. A decision's retry
// returns its first result, whatever the state is now.
func TestRetriedDecisionReturnsItsFirstResult(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	unknownOutcome(t, f, sim)
	ref := sim.Charges()[0].TaskID
	adopt := DecisionInput{RequestID: "adopt-1", Action: allot.ActionAdopt, Step: "video", RemoteRef: ref, By: "alice"}
	first, err := f.decide(t, adopt)
	if err != nil {
		t.Fatal(err)
	}
	// The task moves on (the result is downloaded) before the retry comes.
	if err := sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask); err != nil {
		t.Fatal(err)
	}
	again, err := f.decide(t, adopt)
	if err != nil {
		t.Fatalf("the retried adopt failed after the first took effect: %v", err)
	}
	if again.Action != first.Action || again.Step != first.Step || again.Revision != first.Revision {
		t.Fatalf("retry = %+v, first = %+v", again, first)
	}
	if ds := f.decisions(t); len(ds) != 1 || ds[0].By != "alice" {
		t.Fatalf("decisions recorded: %+v, want one, by alice", ds)
	}
	if sim.ChargeCount() != 1 {
		t.Fatalf("charges = %d, want 1", sim.ChargeCount())
	}
}

// Defect: an unknown outcome parked for another reason (credentials
// unreadable for a moment) was resubmitted without asking the vendor. A
// task that may have been sent is looked up before anything is sent again,
// whatever the park reason and whatever the operator's retry.
func TestMaybeSentTaskIsLookedUpBeforeAnySend(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	var submits, lookups atomic.Int32
	f.acts.NewVendor = countingVendor(f.acts.NewVendor, &submits, &lookups)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if err := sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err == nil {
		t.Fatal("a lost response was reported as success")
	}
	if task := f.task(t); !task.MaybeSent || task.State != allot.PaidIntent {
		t.Fatalf("after a lost response the task is %+v, want an intent that may have been sent", task)
	}
	// The credentials cannot be read: the episode parks.
	good := f.acts.Credentials
	f.acts.Credentials = failingCredentials{}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	wantAppError(t, err, allot.VendorNotConfigured)
	// The operator fixes them and retries; the vendor answers again.
	f.acts.Credentials = good
	if err := sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.decide(t, DecisionInput{RequestID: "retry-1", Action: allot.ActionRetry, Step: "video"}); err != nil {
		t.Fatal(err)
	}
	submitsBefore := submits.Load()
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil {
		t.Fatal(err)
	}
	if submits.Load() != submitsBefore || lookups.Load() == 0 {
		t.Fatalf("after the retry: %d new submits, %d lookups; want the task looked up and nothing sent", submits.Load()-submitsBefore, lookups.Load())
	}
	if res.State != allot.PaidSubmitted || res.RemoteRef != sim.Charges()[0].TaskID || sim.ChargeCount() != 1 {
		t.Fatalf("result %+v, charges %d: want the accepted task adopted, charged once", res, sim.ChargeCount())
	}
}

// Without lookup, a task that may have been sent parks as OutcomeUnknown
// however often it is retried; an intent that was never sent (its writer
// died before sending) is sent by the next attempt.
func TestNoLookupParksOnlyWhatMayHaveBeenSent(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if err := sim.SetFaults(paidvendortest.SimFaults{NoLookup: true, IgnoreIdempotency: true}); err != nil {
		t.Fatal(err)
	}
	// An attempt wrote the intent and died before sending.
	if _, err := f.led.WriteIntent(f.ctx, videoRef(), allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0), "dead-attempt"); err != nil {
		t.Fatal(err)
	}
	res, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	if err != nil || res.State != allot.PaidSubmitted || sim.ChargeCount() != 1 {
		t.Fatalf("an unsent intent was not taken over and sent: %+v, %v, %d charges", res, err, sim.ChargeCount())
	}

	// The next episode's attempt marked its send, then died.
	f.mustAllocate(t, "tokyo", "run-2", tokyoNominal)
	ref := ledger.PaidTaskRef{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"}
	if _, err := f.led.WriteIntent(f.ctx, ref, allot.IdempotencyKey("tokyo", "2026-08-07-1", "video", 0), "dying-attempt"); err != nil {
		t.Fatal(err)
	}
	// While its send may still arrive, nobody asks or sends.
	if _, err := f.led.MarkSending(f.ctx, ref, "dying-attempt", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"})
	var appErr *temporal.ApplicationError
	if err == nil || errors.As(err, &appErr) && appErr.NonRetryable() {
		t.Fatalf("a send still in flight: got %v, want a retryable error", err)
	}
	// The next attempt is due when the send's deadline has passed, not
	// after the retry policy's backoff (which would use up the step's
	// batch of attempts within seconds).
	if !errors.As(err, &appErr) || appErr.Type() != allot.SendInFlight || appErr.NextRetryDelay() < 59*time.Minute || appErr.NextRetryDelay() > 61*time.Minute {
		t.Fatalf("a send still in flight for an hour: got %v, want the next attempt in an hour", err)
	}
	if _, err := f.led.MarkSending(f.ctx, ref, "dying-attempt", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"})
		wantAppError(t, err, allot.OutcomeUnknown)
	}
	if sim.ChargeCount() != 1 {
		t.Fatalf("charges = %d: a task that may have been sent was sent again", sim.ChargeCount())
	}
}

// Defect: two submissions of one paid task could both reach the vendor
// (the loser of the intent adopted the winner's fresh intent and sent it).
// Concurrent attempts on a vendor that ignores idempotency keys, so that a
// second send would show as a second charge: one charge.
func TestConcurrentAttemptsSendOnce(t *testing.T) {
	for _, noLookup := range []bool{false, true} {
		f := newFixture(t, nil)
		sim, _, _ := withVendor(t, f)
		f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
		if err := sim.SetFaults(paidvendortest.SimFaults{IgnoreIdempotency: true, NoLookup: noLookup, Latency: 50e6}); err != nil {
			t.Fatal(err)
		}
		const attempts = 6
		var wg sync.WaitGroup
		errs := make([]error, attempts)
		for i := range attempts {
			// Each goroutine is its own activity environment, as attempts
			// on different workers are.
			env := newFixtureEnv(f.acts)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = env.ExecuteActivity(f.acts.SubmitPaidTask, videoTask)
			}()
		}
		wg.Wait()
		for _, ch := range sim.Charges() {
			t.Logf("charge %+v", ch)
		}
		if sim.ChargeCount() != 1 {
			t.Fatalf("noLookup=%v: %d concurrent attempts made %d charges, want 1 (errors %v)", noLookup, attempts, sim.ChargeCount(), errs)
		}
	}
}

// Defect: a revoked key (401/403) on lookup or polling was retried forever.
// It parks like on submit.
func TestRevokedKeyParksOnLookupAndPoll(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil {
		t.Fatal(err)
	}
	f.acts.Credentials = staticKey("sk-revoked")
	_, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask)
	wantAppError(t, err, allot.VendorNotConfigured)

	f.mustAllocate(t, "tokyo", "run-2", tokyoNominal)
	other := ledger.PaidTaskRef{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"}
	if _, err := f.led.WriteIntent(f.ctx, other, allot.IdempotencyKey("tokyo", "2026-08-07-1", "video", 0), "earlier"); err != nil {
		t.Fatal(err)
	}
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"})
	wantAppError(t, err, allot.VendorNotConfigured)
	if sim.ChargeCount() != 1 {
		t.Fatalf("charges = %d", sim.ChargeCount())
	}
}

// The download heartbeats its progress in bytes, so a slow download is not
// killed by the heartbeat timeout and restarted forever.
func TestDownloadHeartbeatsBytes(t *testing.T) {
	f := newFixture(t, nil)
	_, _, _ = withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil {
		t.Fatal(err)
	}
	var progress []int64
	r := &progressReader{r: iotest.OneByteReader(strings.NewReader("0123456789")), every: 0, beat: func(n int64) { progress = append(progress, n) }}
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if len(progress) < 10 || progress[len(progress)-1] != 10 || progress[0] != 1 {
		t.Fatalf("download heartbeats %v, want the bytes read so far after every read", progress)
	}
	// And AwaitPaidTask downloads through it, still verifying the result.
	if res, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, videoTask); err != nil || res.State != allot.PaidSucceeded {
		t.Fatalf("await: %+v, %v", res, err)
	}
}

// adopt accepts only a vendor task that carries this task's idempotency
// key: not another task's, and not one without a key.
func TestAdoptRefusesTaskWithoutThisKey(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := f.led.WriteIntent(f.ctx, videoRef(), allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0), "lost"); err != nil {
		t.Fatal(err)
	}
	f.acts.Credentials = staticKey("k")
	for _, key := range []string{"", allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 7)} {
		f.acts.NewVendor = func(string) (paidvendor.Client, error) {
			return fixedTask{paidvendor.Task{ID: "vt_0123456789abcdef", IdempotencyKey: key, Status: paidvendor.StatusSucceeded, SHA256: strings.Repeat("0", 64)}}, nil
		}
		_, err := f.decide(t, DecisionInput{RequestID: "adopt-" + key, Action: allot.ActionAdopt, Step: "video", RemoteRef: "vt_0123456789abcdef"})
		wantAppError(t, err, allot.InvalidRemoteRef)
	}
	if task := f.task(t); task.State != allot.PaidIntent || task.RemoteRef != "" {
		t.Fatalf("a refused adoption changed the task: %+v", task)
	}
}

// An episode runs the plan it was allocated with: a step added to the
// pipeline later never runs (or charges) for it.
func TestEpisodeRunsItsPinnedPlan(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	first, err := execute[LoadEpisodeResult](t, f, f.acts.LoadEpisode, EpisodeRef{Pipeline: "tokyo", EpisodeID: tokyoEpisode})
	if err != nil {
		t.Fatal(err)
	}
	changed, err := pipeline.Parse([]byte(strings.Replace(testPipelines, `  name = "assemble"`, "  name = \"cover\"\n  kind = \"paid\"\n\n  [[pipeline.step]]\n  name = \"assemble\"", 1)), "changed")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = changed
	again, err := execute[LoadEpisodeResult](t, f, f.acts.LoadEpisode, EpisodeRef{Pipeline: "tokyo", EpisodeID: tokyoEpisode})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != len(first.Steps) {
		t.Fatalf("steps after the pipeline changed: %+v, want the pinned %+v", again.Steps, first.Steps)
	}
	_, err = execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: tokyoEpisode, Step: "cover"})
	wantAppError(t, err, allot.StepNotFound)
	// A new episode gets the new plan.
	f.mustAllocate(t, "tokyo", "run-2", tokyoNominal)
	fresh, err := execute[LoadEpisodeResult](t, f, f.acts.LoadEpisode, EpisodeRef{Pipeline: "tokyo", EpisodeID: "2026-08-07-1"})
	if err != nil || len(fresh.Steps) != len(first.Steps)+1 {
		t.Fatalf("a new episode's steps: %+v, %v", fresh.Steps, err)
	}
}

// An episode that completed before plans were pinned pins the steps it ran,
// not the pipeline's steps of today.
func TestCompletedLegacyEpisodePinsTheStepsItRan(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	f.mustRunLocalStep(t, tokyoEpisode, "plan")
	if _, err := f.led.CompleteEpisode(f.ctx, "tokyo", tokyoEpisode, tokyoNominal); err != nil {
		t.Fatal(err)
	}
	// As a ledger written before plans were pinned has it.
	rawSQL(t, f, `UPDATE episodes SET plan = ''`)
	loaded, err := execute[LoadEpisodeResult](t, f, f.acts.LoadEpisode, EpisodeRef{Pipeline: "tokyo", EpisodeID: tokyoEpisode})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Steps) != 1 || loaded.Steps[0].Name != "plan" {
		t.Fatalf("a completed episode without a pinned plan loaded steps %+v, want only the step it ran", loaded.Steps)
	}
}

// --- fakes for these tests ---

type failingCredentials struct{}

func (failingCredentials) VendorAPIKey(context.Context) (string, error) {
	return "", errors.New("read the vendor API key file: permission denied")
}

type staticKey string

func (k staticKey) VendorAPIKey(context.Context) (string, error) { return string(k), nil }

// countingVendor counts the submit and lookup requests the clients it
// builds send.
func countingVendor(build paidvendor.ClientFactory, submits, lookups *atomic.Int32) paidvendor.ClientFactory {
	return func(key string) (paidvendor.Client, error) {
		c, err := build(key)
		if err != nil {
			return nil, err
		}
		return countingClient{Client: c, submits: submits, lookups: lookups}, nil
	}
}

type countingClient struct {
	paidvendor.Client
	submits, lookups *atomic.Int32
}

func (c countingClient) Submit(ctx context.Context, r paidvendor.SubmitRequest) (paidvendor.Task, error) {
	c.submits.Add(1)
	return c.Client.Submit(ctx, r)
}

func (c countingClient) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	c.lookups.Add(1)
	return c.Client.LookupByIdempotencyKey(ctx, key)
}

// fixedTask is a vendor that knows one task and nothing else.
type fixedTask struct{ t paidvendor.Task }

func (v fixedTask) Submit(context.Context, paidvendor.SubmitRequest) (paidvendor.Task, error) {
	return paidvendor.Task{}, errors.New("fixedTask does not take submissions")
}

func (v fixedTask) Task(_ context.Context, id string) (paidvendor.Task, error) {
	if id == v.t.ID {
		return v.t, nil
	}
	return paidvendor.Task{}, paidvendor.ErrNotFound
}

func (v fixedTask) LookupByIdempotencyKey(context.Context, string) (paidvendor.Task, error) {
	return paidvendor.Task{}, paidvendor.ErrLookupUnsupported
}

func (v fixedTask) Result(context.Context, string) (io.ReadCloser, error) {
	return nil, paidvendor.ErrNoResult
}

// newFixtureEnv is another activity environment on the same activities: a
// second worker.
func newFixtureEnv(acts *Activities) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return env
}

// rawSQL edits the ledger file behind the ledger's back, as legacy data or
// another tool would have left it.
func rawSQL(t *testing.T, f *fixture, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+f.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(f.ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Invariant 16: a paid activity of a workflow that belongs to another
// ledger (two ledgers on one namespace and task queue) is refused with
// LedgerMismatch before the vendor is asked or anything is written; the
// workflow's own ledger goes through.
func TestPaidActivitiesRefuseAnotherLedgersWork(t *testing.T) {
	f := newFixture(t, nil)
	sim, creds, _ := withVendor(t, f)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	foreign := videoTask
	foreign.LedgerID = "another-ledger"
	for name, call := range map[string]func() error{
		"SubmitPaidTask": func() error { _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, foreign); return err },
		"AwaitPaidTask":  func() error { _, err := execute[PaidTaskResult](t, f, f.acts.AwaitPaidTask, foreign); return err },
		"PaidPrepare": func() error {
			_, err := execute[PaidPlan](t, f, f.acts.PaidPrepare, PaidPhaseInput{PaidTaskInput: foreign})
			return err
		},
	} {
		wantAppError(t, call(), allot.LedgerMismatch)
		tasks, err := f.led.PaidTasks(f.ctx, "tokyo", tokyoEpisode)
		if err != nil || len(tasks) != 0 || len(sim.Charges()) != 0 || creds.reads.Load() != 0 {
			t.Fatalf("%s of another ledger's workflow: tasks %+v (%v), %d charges, %d key reads; want nothing", name, tasks, err, len(sim.Charges()), creds.reads.Load())
		}
	}
	own := videoTask
	own.LedgerID = f.led.ID()
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, own); err != nil {
		t.Fatalf("the ledger's own workflow: %v", err)
	}
}

// A send without an answer is reported as SendUnanswered, retryable and
// named, so that the activity adapters' workflow asks the vendor at once
// instead of retrying the bookkeeping that reported it.
func TestUnansweredSendIsNamedAndRetryable(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	_, err := execute[PaidTaskResult](t, f, f.acts.PaidAfterSend, PaidAfterSendInput{
		PaidPhaseInput: PaidPhaseInput{PaidTaskInput: videoTask, Owner: "attempt-1"},
		Outcome:        payonce.SendOutcome{Error: "read tcp: i/o timeout"},
	})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.SendUnanswered || appErr.NonRetryable() {
		t.Fatalf("an unanswered send: %v, want a retryable %s", err, allot.SendUnanswered)
	}
}
