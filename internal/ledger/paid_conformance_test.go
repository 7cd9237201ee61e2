package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
)

// Conformance tests for paid tasks (invariant 7), their owners, cost
// entries (invariant 8) and the decisions that settle them; registered in
// runConformance so that both drivers run them. Decide's own tests are in
// decisions_conformance_test.go, the model-based test of the state machine
// in paid_model_test.go.

func paidRef(ep Episode, step string, rev int) PaidTaskRef {
	return PaidTaskRef{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: step, Revision: rev}
}

// testKey stands in for the name-based UUID the activities derive.
func testKey(r PaidTaskRef) string {
	return fmt.Sprintf("key/%s/%s/%s/%d", r.Pipeline, r.EpisodeID, r.Step, r.Revision)
}

// testOwner stands in for the token of the activity attempt that writes an
// intent (workflow, run, activity and attempt).
const testOwner = "wf/run/5#1"

func mustIntent(t *testing.T, l *Ledger, r PaidTaskRef) PaidTask {
	t.Helper()
	return mustIntentBy(t, l, r, testOwner)
}

func mustIntentBy(t *testing.T, l *Ledger, r PaidTaskRef, owner string) PaidTask {
	t.Helper()
	pt, err := l.WriteIntent(ctxT(t), r, testKey(r), owner)
	if err != nil {
		t.Fatalf("WriteIntent(%+v, %s): %v", r, owner, err)
	}
	return pt
}

// The tests' sends are given the deadline sendUntil; afterSend is a time
// after it, when no such send can still reach the vendor.
var (
	sendUntil = t0.Add(time.Hour)
	afterSend = t0.Add(2 * time.Hour)
)

func mustMarkSending(t *testing.T, l *Ledger, r PaidTaskRef, owner string) PaidTask {
	t.Helper()
	pt, err := l.MarkSending(ctxT(t), r, owner, sendUntil)
	if err != nil {
		t.Fatalf("MarkSending(%+v, %s): %v", r, owner, err)
	}
	return pt
}

// mustTakeIntent takes the intent seen over for to, after any send's
// deadline.
func mustTakeIntent(t *testing.T, l *Ledger, seen PaidTask, to string) PaidTask {
	t.Helper()
	pt, err := l.TakeIntent(ctxT(t), seen, to, afterSend)
	if err != nil {
		t.Fatalf("TakeIntent(%+v, %s): %v", seen, to, err)
	}
	return pt
}

func mustSubmit(t *testing.T, l *Ledger, r PaidTaskRef, remote string, amount int64) PaidTask {
	t.Helper()
	pt, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: remote, Amount: amount, Currency: "EUR"})
	if err != nil {
		t.Fatalf("RecordSubmission(%+v, %s, %d): %v", r, remote, amount, err)
	}
	return pt
}

func mustResult(t *testing.T, l *Ledger, r PaidTaskRef, remote string) PaidTask {
	t.Helper()
	pt, err := l.RecordPaidResult(ctxT(t), r, remote, "/artifacts/"+r.EpisodeID+"/"+r.Step+".bin", "sha-"+remote)
	if err != nil {
		t.Fatalf("RecordPaidResult(%+v, %s): %v", r, remote, err)
	}
	return pt
}

func mustFailure(t *testing.T, l *Ledger, r PaidTaskRef, remote, reason string) PaidTask {
	t.Helper()
	pt, err := l.RecordPaidFailure(ctxT(t), r, remote, reason)
	if err != nil {
		t.Fatalf("RecordPaidFailure(%+v, %s): %v", r, remote, err)
	}
	return pt
}

func mustPaidTask(t *testing.T, l *Ledger, r PaidTaskRef) PaidTask {
	t.Helper()
	pt, err := l.PaidTask(ctxT(t), r)
	if err != nil {
		t.Fatalf("PaidTask(%+v): %v", r, err)
	}
	return pt
}

func mustCosts(t *testing.T, l *Ledger, pipeline, period string) []CostEntry {
	t.Helper()
	cs, err := l.Costs(ctxT(t), pipeline, period)
	if err != nil {
		t.Fatalf("Costs(%q, %q): %v", pipeline, period, err)
	}
	return cs
}

func costTotal(cs []CostEntry) int64 {
	var sum int64
	for _, c := range cs {
		sum += c.Amount
	}
	return sum
}

// decision is an operator request on one step of ep.
func decision(ep Episode, requestID string, action allot.Action, step string) DecisionRequest {
	return DecisionRequest{OperatorDecision: OperatorDecision{
		RequestID: requestID, Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: step, Action: action,
	}}
}

func reworkReq(ep Episode, step, requestID string) DecisionRequest {
	return decision(ep, requestID, allot.ActionRework, step)
}

func abandonReq(ep Episode, step, requestID, reason string) DecisionRequest {
	r := decision(ep, requestID, allot.ActionAbandon, step)
	r.Reason = reason
	return r
}

// adoptReq adopts the vendor task remote, verified to cost amount EUR.
func adoptReq(ep Episode, step, requestID, remote string, amount int64) DecisionRequest {
	r := decision(ep, requestID, allot.ActionAdopt, step)
	r.RemoteRef = remote
	r.Adopted = Submission{RemoteRef: remote, Amount: amount, Currency: "EUR"}
	return r
}

// mustDecide applies a new decision: it fails unless Decide applied it.
func mustDecide(t *testing.T, l *Ledger, r DecisionRequest) OperatorDecision {
	t.Helper()
	d, applied, err := l.Decide(ctxT(t), r)
	if err != nil || !applied {
		t.Fatalf("Decide(%s %s on %s step %q) = %+v, applied %v, %v; want it applied", r.RequestID, r.Action, r.EpisodeID, r.Step, d, applied, err)
	}
	return d
}

// mustRework plans a new revision of step by a rework decision and returns it.
func mustRework(t *testing.T, l *Ledger, ep Episode, step, requestID string) PaidTask {
	t.Helper()
	d := mustDecide(t, l, reworkReq(ep, step, requestID))
	pt := mustPaidTask(t, l, paidRef(ep, step, d.Revision))
	if pt.State != allot.PaidPlanned || pt.RequestID != requestID {
		t.Fatalf("rework %s planned %+v", requestID, pt)
	}
	return pt
}

// wantErr fails unless err is target and its message names every part.
func wantErr(t *testing.T, what string, err, target error, parts ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name %q", what, err, p)
		}
	}
}

func rawInsertPaidTask(t *testing.T, l *Ledger, r PaidTaskRef, key, state, remote string) {
	t.Helper()
	rawExec(t, l, `INSERT INTO paid_tasks (pipeline, episode_id, step, revision, idempotency_key, state, remote_ref, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.Pipeline, r.EpisodeID, r.Step, r.Revision, key, state, remote, l.d.timeArg(t0), l.d.timeArg(t0))
}

func rawInsertCost(t *testing.T, l *Ledger, remote string, r PaidTaskRef, amount int64) {
	t.Helper()
	rawExec(t, l, `INSERT INTO cost_entries (remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, 'EUR', ?)`, remote, r.Pipeline, r.EpisodeID, r.Step, r.Revision, amount, l.d.timeArg(t0))
}

func testPaidHappyPath(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)

	in := mustIntent(t, l, r)
	if in.PaidTaskRef != r || in.State != allot.PaidIntent || in.IdempotencyKey != testKey(r) || in.RemoteRef != "" ||
		in.CreatedAt.IsZero() || !in.UpdatedAt.Equal(in.CreatedAt) || in.RequestID != "" ||
		in.Owner != testOwner || in.MaybeSent || in.ResubmitRequest != "" || in.OutcomeUnknown() {
		t.Fatalf("intent: %+v", in)
	}
	if got := mustPaidTask(t, l, r); got != in {
		t.Fatalf("PaidTask after intent = %+v, want %+v", got, in)
	}

	sending := mustMarkSending(t, l, r, testOwner)
	if sending.State != allot.PaidIntent || sending.Owner != testOwner || !sending.MaybeSent || !sending.OutcomeUnknown() || !sending.SendingUntil.Equal(sendUntil) ||
		sending.UpdatedAt.Before(in.UpdatedAt) || !sending.CreatedAt.Equal(in.CreatedAt) {
		t.Fatalf("sending: %+v", sending)
	}
	if got := mustPaidTask(t, l, r); got != sending {
		t.Fatalf("PaidTask after MarkSending = %+v, want %+v", got, sending)
	}

	sub := mustSubmit(t, l, r, "vr-1", 1250)
	if sub.State != allot.PaidSubmitted || sub.RemoteRef != "vr-1" || sub.IdempotencyKey != in.IdempotencyKey ||
		!sub.CreatedAt.Equal(in.CreatedAt) || sub.UpdatedAt.Before(sending.UpdatedAt) ||
		sub.Owner != "" || sub.MaybeSent || sub.OutcomeUnknown() {
		t.Fatalf("submitted: %+v", sub)
	}
	if got := mustPaidTask(t, l, r); got != sub {
		t.Fatalf("PaidTask after submission = %+v, want %+v", got, sub)
	}

	done, err := l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/render.mp4", "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if done.State != allot.PaidSucceeded || done.RemoteRef != "vr-1" || done.Artifact != "/a/render.mp4" || done.SHA256 != "abc123" || done.Error != "" {
		t.Fatalf("succeeded: %+v", done)
	}
	if got := mustPaidTask(t, l, r); got != done {
		t.Fatalf("PaidTask after result = %+v, want %+v", got, done)
	}
	if got, err := l.LatestPaidTask(ctxT(t), "weekly", ep.ID, "render"); err != nil || got != done {
		t.Fatalf("LatestPaidTask = %+v, %v; want %+v", got, err, done)
	}
	if got, err := l.PaidTasks(ctxT(t), "weekly", ep.ID); err != nil || !slices.Equal(got, []PaidTask{done}) {
		t.Fatalf("PaidTasks = %+v, %v; want [%+v]", got, err, done)
	}
	cs := mustCosts(t, l, "weekly", "")
	if len(cs) != 1 {
		t.Fatalf("Costs = %+v, want one entry", cs)
	}
	c := cs[0]
	c.RecordedAt = time.Time{}
	if want := (CostEntry{RemoteRef: "vr-1", Pipeline: "weekly", EpisodeID: ep.ID, Period: "2026-W32", Step: "render", Amount: 1250, Currency: "EUR"}); c != want {
		t.Fatalf("cost entry %+v, want %+v", c, want)
	}
	if cs[0].RecordedAt.IsZero() {
		t.Fatal("cost entry has no recording time")
	}
	if got, err := l.Cost(ctxT(t), "vr-1"); err != nil || got != cs[0] {
		t.Fatalf("Cost(vr-1) = %+v, %v; want %+v", got, err, cs[0])
	}
	_, err = l.Cost(ctxT(t), "vr-none")
	wantErr(t, "Cost of an unknown reference", err, ErrCostNotFound, "vr-none")
	mustCheckClean(t, l, "")
}

func testPaidIntentNeedsEpisode(t *testing.T, l *Ledger) {
	missing := PaidTaskRef{Pipeline: "weekly", EpisodeID: "2026-W32-0", Step: "render"}
	_, err := l.WriteIntent(ctxT(t), missing, testKey(missing), testOwner)
	wantErr(t, "WriteIntent on an empty ledger", err, ErrEpisodeNotFound, `"weekly"`, "2026-W32-0")

	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	other := PaidTaskRef{Pipeline: "weekly", EpisodeID: "2026-W32-5", Step: "render"}
	_, err = l.WriteIntent(ctxT(t), other, testKey(other), testOwner)
	wantErr(t, "WriteIntent on a missing episode", err, ErrEpisodeNotFound, "2026-W32-5")
	_, err = l.WriteIntent(ctxT(t), PaidTaskRef{Pipeline: "weekly", Step: "render"}, "key", testOwner)
	wantErr(t, "WriteIntent without an episode ID", err, ErrEpisodeNotFound)
	// Same ID in another pipeline is another episode.
	_, err = l.WriteIntent(ctxT(t), paidRef(Episode{Pipeline: "daily", ID: ep.ID}, "render", 0), "key-daily", testOwner)
	wantErr(t, "WriteIntent in another pipeline", err, ErrEpisodeNotFound, `"daily"`)
	if n := countRows(t, l, "paid_tasks"); n != 0 {
		t.Fatalf("WriteIntent on missing episodes wrote %d paid tasks", n)
	}

	_, err = l.PaidTasks(ctxT(t), "weekly", "2026-W32-5")
	wantErr(t, "PaidTasks of a missing episode", err, ErrEpisodeNotFound)
	if ts, err := l.PaidTasks(ctxT(t), "weekly", ep.ID); err != nil || len(ts) != 0 {
		t.Fatalf("PaidTasks of a new episode = %+v, %v", ts, err)
	}
	r := paidRef(ep, "render", 0)
	_, err = l.PaidTask(ctxT(t), r)
	wantErr(t, "PaidTask never written", err, ErrPaidTaskNotFound, "render")
	_, err = l.LatestPaidTask(ctxT(t), "weekly", ep.ID, "render")
	wantErr(t, "LatestPaidTask of a step without tasks", err, ErrPaidTaskNotFound, "render")
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr", Amount: 1, Currency: "EUR"})
	wantErr(t, "RecordSubmission without an intent", err, ErrPaidTaskNotFound)
	_, err = l.TakeIntent(ctxT(t), PaidTask{PaidTaskRef: r, Owner: "a"}, "b", afterSend)
	wantErr(t, "TakeIntent without an intent", err, ErrPaidTaskNotFound, "render")
	_, err = l.MarkSending(ctxT(t), r, testOwner, sendUntil)
	wantErr(t, "MarkSending without an intent", err, ErrPaidTaskNotFound, "render")
	_, err = l.EndSend(ctxT(t), r, testOwner, afterSend)
	wantErr(t, "EndSend without an intent", err, ErrPaidTaskNotFound, "render")
	_, err = l.ReleaseIntent(ctxT(t), r, testOwner, false)
	wantErr(t, "ReleaseIntent without an intent", err, ErrPaidTaskNotFound, "render")
	_, err = l.RecordPaidResult(ctxT(t), r, "vr", "/a/x", "sha")
	wantErr(t, "RecordPaidResult without an intent", err, ErrPaidTaskNotFound)
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr", "boom")
	wantErr(t, "RecordPaidFailure without an intent", err, ErrPaidTaskNotFound)
	missingEp := Episode{Pipeline: "weekly", ID: "2026-W32-5"}
	_, _, err = l.Decide(ctxT(t), reworkReq(missingEp, "render", "req"))
	wantErr(t, "a rework on a missing episode", err, ErrEpisodeNotFound, "2026-W32-5")
	_, _, err = l.Decide(ctxT(t), decision(missingEp, "u", allot.ActionApprove, "approval"))
	wantErr(t, "an approval on a missing episode", err, ErrEpisodeNotFound)
	for _, table := range []string{"paid_tasks", "cost_entries", "operator_decisions", "step_records"} {
		if n := countRows(t, l, table); n != 0 {
			t.Fatalf("%s has %d rows after refused calls", table, n)
		}
	}
}

func testPaidRetryResumes(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	first := mustIntentBy(t, l, r, "attempt-1")
	// A retry before the vendor answered sees the intent unchanged: the
	// same attempt finds its own; the next attempt finds it owned by the
	// first, and asks the vendor before sending.
	if again := mustIntentBy(t, l, r, "attempt-1"); again != first {
		t.Fatalf("second WriteIntent = %+v, want %+v", again, first)
	}
	if next := mustIntentBy(t, l, r, "attempt-2"); next != first || next.Owner != "attempt-1" {
		t.Fatalf("WriteIntent by the next attempt = %+v, want %+v owned by attempt-1", next, first)
	}
	// A key never changes.
	_, err := l.WriteIntent(ctxT(t), r, "another-key", "attempt-2")
	wantErr(t, "WriteIntent with another key", err, ErrInvalidInput, testKey(r), "another-key")
	if got := mustPaidTask(t, l, r); got != first {
		t.Fatalf("a refused WriteIntent changed the task: %+v", got)
	}
	// A key belongs to one task.
	voice := paidRef(ep, "voice", 0)
	_, err = l.WriteIntent(ctxT(t), voice, testKey(r), "attempt-1")
	wantErr(t, "WriteIntent with another task's key", err, ErrInvalidInput, "render")
	if _, err := l.PaidTask(ctxT(t), voice); !errors.Is(err, ErrPaidTaskNotFound) {
		t.Fatalf("a refused WriteIntent wrote a task: %v", err)
	}

	sub := mustSubmit(t, l, r, "vr-1", 500)
	// A retry after the reference was written resumes from it.
	resumed := mustIntentBy(t, l, r, "attempt-3")
	if resumed != sub || resumed.State != allot.PaidSubmitted || resumed.RemoteRef != "vr-1" || resumed.Owner != "" {
		t.Fatalf("WriteIntent after submission = %+v, want the submitted task %+v", resumed, sub)
	}
	done := mustResult(t, l, r, "vr-1")
	if got := mustIntentBy(t, l, r, "attempt-4"); got != done {
		t.Fatalf("WriteIntent after the result = %+v, want %+v", got, done)
	}
	if n := countRows(t, l, "paid_tasks"); n != 1 {
		t.Fatalf("%d paid tasks, want 1", n)
	}
}

// N attempts write the same intent at once: one of them owns it, all see
// that one, and their concurrent submissions of the vendor's one reference
// book its cost once.
func testPaidConcurrentIntent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	const n = 20
	owner := func(i int) string { return fmt.Sprintf("attempt-%02d", i) }
	got := make([]PaidTask, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.WriteIntent(ctxT(t), r, testKey(r), owner(i))
		})
	}
	close(start)
	wg.Wait()
	owners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] || got[i].State != allot.PaidIntent || got[i].MaybeSent {
			t.Fatalf("caller %d got %+v, caller 0 got %+v", i, got[i], got[0])
		}
		if got[i].Owner == owner(i) {
			owners++
		}
	}
	if owners != 1 {
		t.Fatalf("%d callers own the intent (owner %q), want exactly 1", owners, got[0].Owner)
	}
	if stored := mustPaidTask(t, l, r); stored != got[0] {
		t.Fatalf("stored %+v, callers got %+v", stored, got[0])
	}
	if c := countRows(t, l, "paid_tasks"); c != 1 {
		t.Fatalf("%d paid tasks after concurrent intents, want 1", c)
	}

	subs := make([]PaidTask, n)
	start = make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			subs[i], errs[i] = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-1", Amount: 700, Currency: "EUR"})
		})
	}
	close(start)
	wg.Wait()
	stored := mustPaidTask(t, l, r)
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		if subs[i] != stored || stored.State != allot.PaidSubmitted || stored.RemoteRef != "vr-1" {
			t.Fatalf("submission %d returned %+v, stored %+v", i, subs[i], stored)
		}
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || costTotal(cs) != 700 {
		t.Fatalf("costs after %d concurrent submissions = %+v, want one entry of 700", n, cs)
	}
	mustCheckClean(t, l, "")
}

func testPaidSubmissionCostOnce(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	sub := mustSubmit(t, l, r, "vr-1", 1250)
	before := mustCosts(t, l, "weekly", "")

	// The same submission recorded again (a retried activity) changes
	// neither the task nor the total.
	if again := mustSubmit(t, l, r, "vr-1", 1250); again != sub {
		t.Fatalf("second RecordSubmission = %+v, want %+v", again, sub)
	}
	after := mustCosts(t, l, "weekly", "")
	if !slices.Equal(after, before) || len(after) != 1 || costTotal(after) != 1250 {
		t.Fatalf("costs after recording twice = %+v, want %+v", after, before)
	}

	// A corrected absolute amount replaces the old one; it never adds.
	mustSubmit(t, l, r, "vr-1", 1400)
	cs := mustCosts(t, l, "weekly", "")
	if len(cs) != 1 || cs[0].Amount != 1400 || costTotal(cs) != 1400 {
		t.Fatalf("costs after a new amount = %+v, want one entry of 1400", cs)
	}
	// Also once the task has completed: the state stays.
	done := mustResult(t, l, r, "vr-1")
	got, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-1", Amount: 1500, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if got != done {
		t.Fatalf("RecordSubmission after the result changed the task: %+v, want %+v", got, done)
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].Amount != 1500 {
		t.Fatalf("costs = %+v, want one entry of 1500", cs)
	}
	if n := countRows(t, l, "cost_entries"); n != 1 {
		t.Fatalf("%d cost entries, want 1", n)
	}
}

// An effect step's submission costs nothing: Currency "" and Amount 0
// record the reference without a cost entry.
func testPaidEffectStepNoCost(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "publish", 0)
	mustIntent(t, l, r)
	mustMarkSending(t, l, r, testOwner)
	sub, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "pub-1"})
	if err != nil {
		t.Fatal(err)
	}
	if sub.State != allot.PaidSubmitted || sub.RemoteRef != "pub-1" || sub.Owner != "" || sub.MaybeSent {
		t.Fatalf("effect step submitted: %+v", sub)
	}
	if n := countRows(t, l, "cost_entries"); n != 0 {
		t.Fatalf("an effect step's submission wrote %d cost entries", n)
	}
	_, err = l.Cost(ctxT(t), "pub-1")
	wantErr(t, "Cost of an effect step", err, ErrCostNotFound, "pub-1")
	// Recorded again (a retry): still nothing booked.
	if again, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "pub-1"}); err != nil || again != sub {
		t.Fatalf("effect submission again = %+v, %v; want %+v", again, err, sub)
	}
	// An amount without a currency is not free: it is refused.
	before := dumpTables(t, l)
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "pub-1", Amount: 5})
	wantErr(t, "an amount without a currency", err, ErrInvalidInput, "currency")
	mustBeUnchanged(t, l, "a submission with an amount and no currency", before)
	// Without a cost entry the reference still belongs to this task only.
	other := paidRef(ep, "notify", 0)
	mustIntent(t, l, other)
	before = dumpTables(t, l)
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: other, RemoteRef: "pub-1"})
	wantErr(t, "another task's reference, without costs", err, ErrRemoteRefConflict, "pub-1", "publish")
	mustBeUnchanged(t, l, "a refused effect submission", before)
	mustResult(t, l, r, "pub-1")
	if n := countRows(t, l, "cost_entries"); n != 0 {
		t.Fatalf("%d cost entries, want none", n)
	}
	mustCheckClean(t, l, "")
}

func testPaidRemoteRefConflict(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	sub := mustSubmit(t, l, r, "vr-1", 1250)
	costs := mustCosts(t, l, "weekly", "")

	_, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-2", Amount: 2000, Currency: "EUR"})
	wantErr(t, "RecordSubmission with another reference", err, ErrRemoteRefConflict, "vr-1", "vr-2", "render")
	if got := mustPaidTask(t, l, r); got != sub {
		t.Fatalf("a refused submission changed the task: %+v", got)
	}
	if got := mustCosts(t, l, "weekly", ""); !slices.Equal(got, costs) {
		t.Fatalf("a refused submission changed the costs: %+v, want %+v", got, costs)
	}

	// A reference belongs to one task, whoever owns the other's intent.
	voice := paidRef(ep, "voice", 0)
	vin := mustIntentBy(t, l, voice, "attempt-v")
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: voice, RemoteRef: "vr-1", Amount: 10, Currency: "EUR"})
	wantErr(t, "RecordSubmission with another task's reference", err, ErrRemoteRefConflict, "vr-1")
	if got := mustPaidTask(t, l, voice); got != vin {
		t.Fatalf("a refused submission changed the other task: %+v", got)
	}
	if got := mustCosts(t, l, "weekly", ""); !slices.Equal(got, costs) {
		t.Fatalf("a refused submission changed the costs: %+v", got)
	}
	// Nor can an operator adopt another task's reference.
	before := dumpTables(t, l)
	_, _, err = l.Decide(ctxT(t), adoptReq(ep, "voice", "adopt-1", "vr-1", 10))
	wantErr(t, "adopting another task's reference", err, ErrRemoteRefConflict, "vr-1")
	mustBeUnchanged(t, l, "a refused adopt", before)

	_, err = l.RecordPaidResult(ctxT(t), r, "vr-2", "/a/x", "sha")
	wantErr(t, "RecordPaidResult with another reference", err, ErrRemoteRefConflict)
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr-2", "boom")
	wantErr(t, "RecordPaidFailure with another reference", err, ErrRemoteRefConflict)

	// Nothing is sent for a planned revision, so nothing can be recorded.
	planned := mustRework(t, l, ep, "music", "req-1")
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: planned.PaidTaskRef, RemoteRef: "vr-3", Amount: 1, Currency: "EUR"})
	wantErr(t, "RecordSubmission on a planned task", err, ErrPaidTaskState, "planned", "intent")
	if got := mustPaidTask(t, l, r); got != sub {
		t.Fatalf("task changed: %+v", got)
	}
	if n := countRows(t, l, "cost_entries"); n != 1 {
		t.Fatalf("%d cost entries, want 1", n)
	}
}

func testPaidResultNeverOverwritten(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	_, err := l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/render.mp4", "aaa")
	wantErr(t, "RecordPaidResult before the reference", err, ErrPaidTaskState, "render", "revision 0", "intent", "submitted")

	mustSubmit(t, l, r, "vr-1", 100)
	done, err := l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/render.mp4", "aaa")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/render.mp4", "aaa"); err != nil || again != done {
		t.Fatalf("the same result again = %+v, %v; want %+v unchanged", again, err, done)
	}
	_, err = l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/render.mp4", "bbb")
	wantErr(t, "RecordPaidResult with another SHA-256", err, ErrPaidTaskState, "render", "succeeded", "aaa", "bbb")
	_, err = l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/other.mp4", "aaa")
	wantErr(t, "RecordPaidResult with another artifact", err, ErrPaidTaskState, "succeeded")
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr-1", "late failure")
	wantErr(t, "RecordPaidFailure after success", err, ErrPaidTaskState, "succeeded")
	// Nor does an operator take it back: a succeeded task is final.
	_, _, err = l.Decide(ctxT(t), abandonReq(ep, "render", "abandon-1", "changed my mind"))
	wantErr(t, "abandoning a succeeded task", err, ErrPaidTaskState, "succeeded")
	if got := mustPaidTask(t, l, r); got != done {
		t.Fatalf("the verified result changed: %+v, want %+v", got, done)
	}
}

func testPaidFailure(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	_, err := l.RecordPaidFailure(ctxT(t), r, "vr-1", "boom")
	wantErr(t, "RecordPaidFailure before the reference", err, ErrPaidTaskState, "intent")
	mustSubmit(t, l, r, "vr-1", 100)
	failed, err := l.RecordPaidFailure(ctxT(t), r, "vr-1", "vendor: content policy")
	if err != nil {
		t.Fatal(err)
	}
	if failed.State != allot.PaidFailed || failed.Error != "vendor: content policy" || failed.RemoteRef != "vr-1" {
		t.Fatalf("failed: %+v", failed)
	}
	if again, err := l.RecordPaidFailure(ctxT(t), r, "vr-1", "another reason"); err != nil || again != failed {
		t.Fatalf("failure again = %+v, %v; want %+v unchanged", again, err, failed)
	}
	_, err = l.RecordPaidResult(ctxT(t), r, "vr-1", "/a/x", "sha")
	wantErr(t, "RecordPaidResult after failure", err, ErrPaidTaskState, "failed")
	if got := mustIntent(t, l, r); got != failed {
		t.Fatalf("WriteIntent on a failed task = %+v, want %+v", got, failed)
	}
	// The cost of the failed submission stays booked.
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].Amount != 100 {
		t.Fatalf("costs = %+v", cs)
	}
}

// A rework (Decide) plans a new revision of a settled step.
func testRework(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	// With no task yet the first revision is 0.
	d := mustDecide(t, l, reworkReq(ep, "music", "req-a"))
	if d.Revision != 0 || d.Step != "music" || d.Action != allot.ActionRework || d.RequestID != "req-a" {
		t.Fatalf("first rework decision: %+v", d)
	}
	music := mustPaidTask(t, l, paidRef(ep, "music", 0))
	if music.State != allot.PaidPlanned || music.RequestID != "req-a" || music.IdempotencyKey != "" || music.Owner != "" || music.MaybeSent {
		t.Fatalf("first planned revision: %+v", music)
	}

	r0 := paidRef(ep, "render", 0)
	mustIntent(t, l, r0)
	before := dumpTables(t, l)
	_, _, err := l.Decide(ctxT(t), reworkReq(ep, "render", "req-b"))
	wantErr(t, "a rework while an intent is unsent", err, ErrPaidTaskState, "render", "revision 0", "intent", "rework", "abandon")
	mustBeUnchanged(t, l, "a rework refused while an intent is unsent", before)
	mustMarkSending(t, l, r0, testOwner)
	before = dumpTables(t, l)
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "render", "req-b"))
	wantErr(t, "a rework while the outcome is unknown", err, ErrPaidTaskState, "revision 0", "outcome unknown", "settle the unknown outcome")
	mustBeUnchanged(t, l, "a rework refused while the outcome is unknown", before)
	mustSubmit(t, l, r0, "vr-0", 100)
	before = dumpTables(t, l)
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "render", "req-b"))
	wantErr(t, "a rework while submitted", err, ErrPaidTaskState, "submitted")
	mustBeUnchanged(t, l, "a rework refused while submitted", before)
	mustResult(t, l, r0, "vr-0")

	d1 := mustDecide(t, l, reworkReq(ep, "render", "req-b"))
	rev1 := mustPaidTask(t, l, paidRef(ep, "render", 1))
	if d1.Revision != 1 || rev1.State != allot.PaidPlanned || rev1.RequestID != "req-b" || rev1.IdempotencyKey != "" {
		t.Fatalf("rework revision: %+v, decision %+v", rev1, d1)
	}
	// The activity's retry gets the same decision back and plans nothing.
	before = dumpTables(t, l)
	if again, applied, err := l.Decide(ctxT(t), reworkReq(ep, "render", "req-b")); err != nil || applied || again != d1 {
		t.Fatalf("rework retried = %+v, %v, %v; want %+v, false", again, applied, err, d1)
	}
	mustBeUnchanged(t, l, "a retried rework", before)
	// While the new revision is planned, another rework waits for it.
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "render", "req-c"))
	wantErr(t, "a rework over a planned revision", err, ErrPaidTaskState, "revision 1", "planned", "not been sent")
	// Planning then sending: the planned revision gets its own key.
	r1 := paidRef(ep, "render", 1)
	in1 := mustIntent(t, l, r1)
	if in1.State != allot.PaidIntent || in1.IdempotencyKey != testKey(r1) || in1.RequestID != "req-b" || !in1.CreatedAt.Equal(rev1.CreatedAt) || in1.Owner != testOwner {
		t.Fatalf("intent of a planned revision: %+v", in1)
	}
	if got, err := l.LatestPaidTask(ctxT(t), "weekly", ep.ID, "render"); err != nil || got != in1 {
		t.Fatalf("LatestPaidTask = %+v, %v; want %+v", got, err, in1)
	}
	mustSubmit(t, l, r1, "vr-1", 120)
	mustFailure(t, l, r1, "vr-1", "too dark")
	if d2 := mustDecide(t, l, reworkReq(ep, "render", "req-c")); d2.Revision != 2 {
		t.Fatalf("rework of a failed revision: %+v", d2)
	}
	// An older revision left in flight also blocks a rework (imported data:
	// music's revision 1 succeeded while revision 0 is still planned).
	rawInsertPaidTask(t, l, paidRef(ep, "music", 1), testKey(paidRef(ep, "music", 1)), "succeeded", "vr-m1")
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "music", "req-m2"))
	wantErr(t, "a rework while an older revision is planned", err, ErrPaidTaskState, `"music" revision 0`, "planned")
	// A request ID belongs to one decision of the episode: reused for
	// another step it returns the first decision and plans nothing.
	before = dumpTables(t, l)
	if got, applied, err := l.Decide(ctxT(t), reworkReq(ep, "voice", "req-b")); err != nil || applied || got != d1 {
		t.Fatalf("request req-b reused for voice = %+v, %v, %v; want %+v, false", got, applied, err, d1)
	}
	mustBeUnchanged(t, l, "a reused request ID", before)
	// In another episode (another workflow) it is another request.
	other := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	if d := mustDecide(t, l, reworkReq(other, "render", "req-b")); d.Revision != 0 || d.EpisodeID != other.ID {
		t.Fatalf("req-b in another episode: %+v", d)
	}

	ts, err := l.PaidTasks(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, pt := range ts {
		order = append(order, fmt.Sprintf("%s/%d", pt.Step, pt.Revision))
	}
	if want := []string{"music/0", "music/1", "render/0", "render/1", "render/2"}; !slices.Equal(order, want) {
		t.Fatalf("PaidTasks order = %v, want %v", order, want)
	}
	mustCheckClean(t, l, "")
}

// Concurrent reworks: the same request from several retries plans one
// revision; distinct requests at once plan one, and the others are told the
// step has a planned revision.
func testReworkConcurrent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r0 := paidRef(ep, "render", 0)
	mustIntent(t, l, r0)
	mustSubmit(t, l, r0, "vr-0", 100)
	mustResult(t, l, r0, "vr-0")

	const n = 10
	got := make([]OperatorDecision, n)
	applied := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], applied[i], errs[i] = l.Decide(ctxT(t), reworkReq(ep, "render", "req-same"))
		})
	}
	close(start)
	wg.Wait()
	appliedN := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] || got[i].Revision != 1 {
			t.Fatalf("caller %d got %+v, caller 0 got %+v", i, got[i], got[0])
		}
		if applied[i] {
			appliedN++
		}
	}
	if appliedN != 1 {
		t.Fatalf("%d callers applied the same rework, want 1", appliedN)
	}
	if c := countRows(t, l, "paid_tasks"); c != 2 {
		t.Fatalf("%d paid tasks, want 2", c)
	}

	// Settle revision 1, then distinct requests at once.
	r1 := paidRef(ep, "render", 1)
	mustIntent(t, l, r1)
	mustSubmit(t, l, r1, "vr-1", 100)
	mustResult(t, l, r1, "vr-1")
	const m = 6
	start = make(chan struct{})
	for i := range m {
		wg.Go(func() {
			<-start
			got[i], applied[i], errs[i] = l.Decide(ctxT(t), reworkReq(ep, "render", fmt.Sprintf("req-%d", i)))
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range m {
		switch {
		case errs[i] == nil && applied[i] && got[i].Revision == 2:
			winners++
		case errors.Is(errs[i], ErrPaidTaskState) && strings.Contains(errs[i].Error(), "planned"):
		default:
			t.Fatalf("request %d: %+v, %v, %v; want revision 2 planned or refused while it is planned", i, got[i], applied[i], errs[i])
		}
	}
	if winners != 1 {
		t.Fatalf("%d distinct reworks were applied at once, want 1", winners)
	}
	if c := countRows(t, l, "paid_tasks"); c != 3 {
		t.Fatalf("%d paid tasks, want 3", c)
	}
	if c := countRows(t, l, "operator_decisions"); c != 2 {
		t.Fatalf("%d decisions, want 2", c)
	}
}

// ReleaseIntent (the vendor refused) and abandon (an operator gives up).
func testReleaseAndAbandon(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	_, err := l.ReleaseIntent(ctxT(t), r, testOwner, false)
	wantErr(t, "ReleaseIntent of a task never written", err, ErrPaidTaskNotFound)

	in := mustIntentBy(t, l, r, "attempt-1")
	mustMarkSending(t, l, r, "attempt-1")
	// The vendor definitely refused: back to planned, same key, no owner.
	rel, err := l.ReleaseIntent(ctxT(t), r, "attempt-1", false)
	if err != nil {
		t.Fatal(err)
	}
	if rel.State != allot.PaidPlanned || rel.IdempotencyKey != in.IdempotencyKey || rel.RemoteRef != "" || rel.Owner != "" || rel.MaybeSent {
		t.Fatalf("released: %+v", rel)
	}
	if got := mustPaidTask(t, l, r); got != rel {
		t.Fatalf("stored %+v, ReleaseIntent returned %+v", got, rel)
	}
	before := dumpTables(t, l)
	_, err = l.ReleaseIntent(ctxT(t), r, "attempt-1", false)
	wantErr(t, "ReleaseIntent of a planned task", err, ErrPaidTaskState, "planned", "intent")
	mustBeUnchanged(t, l, "a refused release", before)
	_, err = l.WriteIntent(ctxT(t), r, "another-key", "attempt-2")
	wantErr(t, "WriteIntent of a released task with another key", err, ErrInvalidInput)
	if in2 := mustIntentBy(t, l, r, "attempt-2"); in2.State != allot.PaidIntent || in2.IdempotencyKey != in.IdempotencyKey || in2.Owner != "attempt-2" {
		t.Fatalf("intent after release: %+v", in2)
	}

	// resolve --abandon.
	_, _, err = l.Decide(ctxT(t), abandonReq(ep, "render", "ab-0", ""))
	wantErr(t, "abandon without a reason", err, ErrInvalidInput, "reason")
	d := mustDecide(t, l, abandonReq(ep, "render", "ab-1", "vendor cannot tell; operator gave up"))
	if d.Revision != 0 || d.Reason != "vendor cannot tell; operator gave up" {
		t.Fatalf("abandon decision: %+v", d)
	}
	ab := mustPaidTask(t, l, r)
	if ab.State != allot.PaidAbandoned || ab.Error != "vendor cannot tell; operator gave up" || ab.Owner != "" || ab.ResubmitRequest != "" {
		t.Fatalf("abandoned: %+v", ab)
	}
	before = dumpTables(t, l)
	if again, applied, err := l.Decide(ctxT(t), abandonReq(ep, "render", "ab-1", "other reason")); err != nil || applied || again != d {
		t.Fatalf("abandon retried = %+v, %v, %v; want %+v, false", again, applied, err, d)
	}
	_, _, err = l.Decide(ctxT(t), abandonReq(ep, "render", "ab-2", "other reason"))
	wantErr(t, "abandoning an abandoned task", err, ErrPaidTaskState, "abandoned")
	_, err = l.ReleaseIntent(ctxT(t), r, "attempt-2", false)
	wantErr(t, "ReleaseIntent of an abandoned task", err, ErrPaidTaskState, "abandoned")
	_, err = l.MarkSending(ctxT(t), r, "attempt-2", sendUntil)
	wantErr(t, "MarkSending of an abandoned task", err, ErrPaidTaskState, "abandoned")
	if got := mustIntentBy(t, l, r, "attempt-3"); got != ab {
		t.Fatalf("WriteIntent of an abandoned task = %+v, want %+v", got, ab)
	}
	mustBeUnchanged(t, l, "calls on an abandoned task", before)

	// An abandoned revision can be reworked, and a planned one abandoned.
	if rev := mustRework(t, l, ep, "render", "req-1"); rev.Revision != 1 {
		t.Fatalf("rework after abandon: %+v", rev)
	}
	mustDecide(t, l, abandonReq(ep, "render", "ab-3", "not needed after all"))
	if got := mustPaidTask(t, l, paidRef(ep, "render", 1)); got.State != allot.PaidAbandoned || got.Error != "not needed after all" {
		t.Fatalf("abandoned planned revision: %+v", got)
	}

	// A submitted task is not released (the vendor has it), but an operator
	// may abandon it, e.g. when the vendor lost it; its cost stays booked.
	v := paidRef(ep, "voice", 0)
	mustIntent(t, l, v)
	sub := mustSubmit(t, l, v, "vr-v", 10)
	_, err = l.ReleaseIntent(ctxT(t), v, testOwner, false)
	wantErr(t, "ReleaseIntent of a submitted task", err, ErrPaidTaskState, "voice", "submitted", "intent")
	if got := mustPaidTask(t, l, v); got != sub {
		t.Fatalf("submitted task changed: %+v", got)
	}
	mustDecide(t, l, abandonReq(ep, "voice", "ab-v", "the vendor lost it"))
	if got := mustPaidTask(t, l, v); got.State != allot.PaidAbandoned || got.RemoteRef != "vr-v" || got.Error != "the vendor lost it" {
		t.Fatalf("abandoned submitted task: %+v", got)
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].RemoteRef != "vr-v" || cs[0].Amount != 10 {
		t.Fatalf("costs after abandoning a submitted task: %+v", cs)
	}
	mustCheckClean(t, l, "")
}

func testDecisions(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	other := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	at := time.Date(2026, 8, 4, 12, 0, 0, 0, time.UTC)
	r0 := paidRef(ep, "render", 0)
	mustIntent(t, l, r0)
	mustSubmit(t, l, r0, "vr-0", 100)
	mustResult(t, l, r0, "vr-0")

	rework := OperatorDecision{RequestID: "upd-1", Pipeline: "weekly", EpisodeID: ep.ID, Step: "render",
		Action: allot.ActionRework, Reason: "too dark", At: at}
	want := rework
	want.Revision = 1
	got, applied, err := l.Decide(ctxT(t), DecisionRequest{OperatorDecision: rework})
	if err != nil || !applied || got != want {
		t.Fatalf("Decide = %+v, %v, %v; want %+v, true", got, applied, err, want)
	}
	// The retried update: the stored decision, nothing written.
	retry := rework
	retry.Reason, retry.At = "changed my mind", at.Add(time.Hour)
	before := dumpTables(t, l)
	got, applied, err = l.Decide(ctxT(t), DecisionRequest{OperatorDecision: retry})
	if err != nil || applied || got != want {
		t.Fatalf("Decide retried = %+v, %v, %v; want %+v, false", got, applied, err, want)
	}
	mustBeUnchanged(t, l, "a retried decision", before)

	approve, applied, err := l.Decide(ctxT(t), decision(ep, "upd-2", allot.ActionApprove, "approval"))
	if err != nil || !applied || approve.At.IsZero() || approve.At.Location() != time.UTC || approve.Revision != 0 {
		t.Fatalf("approve: %+v, %v, %v", approve, applied, err)
	}
	v := paidRef(ep, "voice", 0)
	mustIntent(t, l, v)
	earlierReq := adoptReq(ep, "voice", "upd-0", "vr-9", 30)
	earlierReq.Reason, earlierReq.At = "found it in the vendor console", at.Add(-time.Hour)
	earlier := mustDecide(t, l, earlierReq)
	if earlier != earlierReq.OperatorDecision {
		t.Fatalf("adopt decision %+v, want %+v", earlier, earlierReq.OperatorDecision)
	}
	// The same update ID in another episode's workflow is another decision.
	reject := decision(other, "upd-1", allot.ActionReject, "approval")
	reject.Reason = "off topic"
	if _, applied, err := l.Decide(ctxT(t), reject); err != nil || !applied {
		t.Fatalf("same request ID in another episode: %v, %v", applied, err)
	}

	ds, err := l.Decisions(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w := []OperatorDecision{earlier, want, approve}; !slices.Equal(ds, w) {
		t.Fatalf("Decisions =\n%+v\nwant\n%+v", ds, w)
	}
	if d, ok, err := l.Decision(ctxT(t), "weekly", ep.ID, "upd-1"); err != nil || !ok || d != want {
		t.Fatalf("Decision(upd-1) = %+v, %v, %v; want %+v", d, ok, err, want)
	}
	if d, ok, err := l.Decision(ctxT(t), "weekly", other.ID, "upd-1"); err != nil || !ok || d.Action != allot.ActionReject || d.Reason != "off topic" {
		t.Fatalf("Decision(other, upd-1) = %+v, %v, %v", d, ok, err)
	}
	if d, ok, err := l.Decision(ctxT(t), "weekly", ep.ID, "upd-9"); err != nil || ok || d != (OperatorDecision{}) {
		t.Fatalf("Decision(unknown) = %+v, %v, %v; want none", d, ok, err)
	}
	_, err = l.Decisions(ctxT(t), "weekly", "2026-W32-9")
	wantErr(t, "Decisions of a missing episode", err, ErrEpisodeNotFound)

	mustIntent(t, l, paidRef(ep, "music", 0))
	before = dumpTables(t, l)
	reassemble := func(reset ...string) DecisionRequest {
		r := decision(ep, "x9", allot.ActionReassemble, "")
		r.Reset = reset
		return r
	}
	for name, r := range map[string]DecisionRequest{
		"unknown action":   decision(ep, "x1", "delete", "render"),
		"no request ID":    decision(ep, "", allot.ActionApprove, "approval"),
		"rework, no step":  decision(ep, "x2", allot.ActionRework, ""),
		"adopt, no ref":    decision(ep, "x3", allot.ActionAdopt, "music"),
		"adopt, no task":   {OperatorDecision: adoptReq(ep, "music", "x4", "vr-m", 1).OperatorDecision},
		"abandon, reason":  abandonReq(ep, "music", "x5", ""),
		"approve, no step": decision(ep, "x6", allot.ActionApprove, ""),
		"no pipeline":      decision(Episode{ID: ep.ID}, "x7", allot.ActionApprove, "approval"),
		"empty action":     decision(ep, "x8", "", "render"),
		"capitalised verb": decision(ep, "x10", "Approve", "approval"),
		"empty reset name": reassemble("assemble", ""),
	} {
		if _, _, err := l.Decide(ctxT(t), r); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", name, err)
		}
	}
	mustBeUnchanged(t, l, "invalid decisions", before)
}

func testCostsByPeriod(t *testing.T, l *Ledger) {
	w32 := alloc(t, l, "weekly", "a", "2026-W32", 0).Episode
	w32b := alloc(t, l, "weekly", "b", "2026-W32", 0).Episode
	w33 := alloc(t, l, "weekly", "c", "2026-W33", 0).Episode
	day := alloc(t, l, "daily", "d", "2026-08-03", 0).Episode
	pay := func(r PaidTaskRef, remote string, amount int64) {
		t.Helper()
		mustIntent(t, l, r)
		mustSubmit(t, l, r, remote, amount)
		mustResult(t, l, r, remote)
	}
	// Written out of order on purpose.
	pay(paidRef(w33, "render", 0), "vr-33", 300)
	pay(paidRef(w32b, "render", 0), "vr-32b", 200)
	pay(paidRef(w32, "voice", 0), "vr-32-voice", 50)
	pay(paidRef(w32, "render", 0), "vr-32-r0", 100)
	mustRework(t, l, w32, "render", "rework-1")
	pay(paidRef(w32, "render", 1), "vr-32-r1", 120)
	pay(paidRef(day, "render", 0), "vr-day", 7)

	refs := func(cs []CostEntry) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.RemoteRef)
		}
		return out
	}
	all := mustCosts(t, l, "weekly", "")
	if want := []string{"vr-32-r0", "vr-32-r1", "vr-32-voice", "vr-32b", "vr-33"}; !slices.Equal(refs(all), want) {
		t.Fatalf("Costs(weekly) = %v, want %v", refs(all), want)
	}
	if costTotal(all) != 770 {
		t.Fatalf("weekly total %d, want 770", costTotal(all))
	}
	for _, c := range all {
		if want := strings.TrimSuffix(strings.TrimSuffix(c.EpisodeID, "-0"), "-1"); c.Period != want {
			t.Errorf("cost %s: period %q, want %q", c.RemoteRef, c.Period, want)
		}
	}
	if r1 := all[1]; r1.Step != "render" || r1.Revision != 1 || r1.EpisodeID != w32.ID || r1.Amount != 120 {
		t.Fatalf("rework cost entry: %+v", r1)
	}
	w32costs := mustCosts(t, l, "weekly", "2026-W32")
	if want := []string{"vr-32-r0", "vr-32-r1", "vr-32-voice", "vr-32b"}; !slices.Equal(refs(w32costs), want) || costTotal(w32costs) != 470 {
		t.Fatalf("Costs(weekly, 2026-W32) = %v (total %d), want %v (470)", refs(w32costs), costTotal(w32costs), want)
	}
	if cs := mustCosts(t, l, "weekly", "2026-W33"); !slices.Equal(refs(cs), []string{"vr-33"}) {
		t.Fatalf("Costs(weekly, 2026-W33) = %v", refs(cs))
	}
	if cs := mustCosts(t, l, "weekly", "2026-W40"); len(cs) != 0 {
		t.Fatalf("Costs of an empty period = %+v", cs)
	}
	if cs := mustCosts(t, l, "daily", ""); len(cs) != 1 || cs[0].Period != "2026-08-03" || cs[0].Pipeline != "daily" {
		t.Fatalf("Costs(daily) = %+v", cs)
	}
	if cs := mustCosts(t, l, "", ""); len(cs) != 6 || cs[0].Pipeline != "daily" {
		t.Fatalf("Costs(every pipeline) = %+v", cs)
	}
	mustCheckClean(t, l, "")
}

// A reassembly (Decide with Reset) reopens the named steps: each moves to
// status reset at its next revision, so that it runs again under a new
// idempotency key.
func testReassembleResetsSteps(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	at := time.Date(2026, 8, 3, 10, 0, 0, 0, time.UTC)
	record := func(step string, i int) {
		t.Helper()
		if err := l.RecordStep(ctxT(t), StepRecord{Pipeline: "weekly", EpisodeID: ep.ID, Step: step, Status: "completed", CompletedAt: at.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range []string{"plan", "assemble", "approval", "publish"} {
		record(step, i)
	}
	req := decision(ep, "re-1", allot.ActionReassemble, "")
	req.Reset = []string{"assemble", "approval", "publish", "never-ran"}
	d := mustDecide(t, l, req)
	if d.Step != "" || d.Revision != 0 || d.Action != allot.ActionReassemble {
		t.Fatalf("reassemble decision: %+v", d)
	}
	want := map[string]string{"plan": "completed@0", "assemble": "reset@1", "approval": "reset@1", "publish": "reset@1", "never-ran": "reset@1"}
	if got := stepStates(t, l, ep); !maps.Equal(got, want) {
		t.Fatalf("steps after reassembly = %v, want %v", got, want)
	}
	if steps, err := l.Steps(ctxT(t), "weekly", ep.ID); err != nil {
		t.Fatal(err)
	} else {
		for _, s := range steps {
			if s.Status == allot.StepReset && (s.Artifact != "" || s.SHA256 != "" || len(s.Outputs) != 0 || len(s.Result) != 0) {
				t.Fatalf("a reset step keeps its outputs: %+v", s)
			}
		}
	}
	// The retried request resets nothing again: assemble ran once more,
	// at its new revision.
	if err := l.RecordStep(ctxT(t), StepRecord{Pipeline: "weekly", EpisodeID: ep.ID, Step: "assemble", Status: "completed", Revision: 1}); err != nil {
		t.Fatal(err)
	}
	if _, applied, err := l.Decide(ctxT(t), req); err != nil || applied {
		t.Fatalf("reassembly retried: %v, %v", applied, err)
	}
	want["assemble"] = "completed@1"
	if got := stepStates(t, l, ep); !maps.Equal(got, want) {
		t.Fatalf("steps after a retried reassembly = %v, want %v", got, want)
	}
	// A record of an older revision does not take the step back.
	record("approval", 9)
	want["approval"] = "completed@1"
	if got := stepStates(t, l, ep); !maps.Equal(got, want) {
		t.Fatalf("steps after recording an old revision = %v, want %v", got, want)
	}
	// A new request resets again, to the next revision; one with nothing
	// to reset is fine.
	again := decision(ep, "re-2", allot.ActionReassemble, "")
	again.Reset = []string{"assemble"}
	mustDecide(t, l, again)
	want["assemble"] = "reset@2"
	mustDecide(t, l, decision(ep, "re-3", allot.ActionReassemble, ""))
	if got := stepStates(t, l, ep); !maps.Equal(got, want) {
		t.Fatalf("steps after a second reassembly = %v, want %v", got, want)
	}
	missing := req
	missing.EpisodeID, missing.RequestID = "2026-W32-9", "re-4"
	_, _, err := l.Decide(ctxT(t), missing)
	wantErr(t, "reassembling a missing episode", err, ErrEpisodeNotFound)
	bad := decision(ep, "re-5", allot.ActionReassemble, "")
	bad.Reset = []string{"plan", ""}
	before := dumpTables(t, l)
	_, _, err = l.Decide(ctxT(t), bad)
	wantErr(t, "a reset with an empty name", err, ErrInvalidInput)
	mustBeUnchanged(t, l, "a refused reset", before)
}

func testPaidInvalidInput(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	for name, bad := range map[string]PaidTaskRef{
		"no pipeline":      {EpisodeID: ep.ID, Step: "render"},
		"no step":          {Pipeline: "weekly", EpisodeID: ep.ID},
		"negative version": {Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Revision: -1},
	} {
		if _, err := l.WriteIntent(ctxT(t), bad, "key", testOwner); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("WriteIntent, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.PaidTask(ctxT(t), bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("PaidTask, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.TakeIntent(ctxT(t), PaidTask{PaidTaskRef: bad, Owner: "a"}, "b", afterSend); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("TakeIntent, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.MarkSending(ctxT(t), bad, testOwner, sendUntil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("MarkSending, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.EndSend(ctxT(t), bad, testOwner, afterSend); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("EndSend, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.ReleaseIntent(ctxT(t), bad, testOwner, false); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ReleaseIntent, %s: got %v, want ErrInvalidInput", name, err)
		}
	}
	_, err := l.WriteIntent(ctxT(t), r, "", testOwner)
	wantErr(t, "WriteIntent without a key", err, ErrInvalidInput)
	_, err = l.WriteIntent(ctxT(t), r, testKey(r), "")
	wantErr(t, "WriteIntent without an owner", err, ErrInvalidInput, "attempt")
	if n := countRows(t, l, "paid_tasks"); n != 0 {
		t.Fatalf("invalid intents wrote %d paid tasks", n)
	}
	in := mustIntent(t, l, r)
	_, err = l.TakeIntent(ctxT(t), in, "", afterSend)
	wantErr(t, "TakeIntent without a new owner", err, ErrInvalidInput)
	_, err = l.MarkSending(ctxT(t), r, testOwner, time.Time{})
	wantErr(t, "MarkSending without a deadline", err, ErrInvalidInput, "deadline")
	for name, s := range map[string]Submission{
		"no remote ref":   {PaidTaskRef: r, Amount: 1, Currency: "EUR"},
		"no currency":     {PaidTaskRef: r, RemoteRef: "vr", Amount: 1},
		"negative amount": {PaidTaskRef: r, RemoteRef: "vr", Amount: -5, Currency: "EUR"},
	} {
		if _, err := l.RecordSubmission(ctxT(t), s); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("RecordSubmission, %s: got %v, want ErrInvalidInput", name, err)
		}
	}
	if got := mustPaidTask(t, l, r); got != in {
		t.Fatalf("invalid calls changed the task: %+v", got)
	}
	if n := countRows(t, l, "cost_entries"); n != 0 {
		t.Fatalf("invalid submissions wrote %d cost entries", n)
	}
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "render", ""))
	wantErr(t, "a rework without a request ID", err, ErrInvalidInput)
	_, _, err = l.Decide(ctxT(t), reworkReq(ep, "", "req"))
	wantErr(t, "a rework without a step", err, ErrInvalidInput)
	mustSubmit(t, l, r, "vr", 1)
	_, err = l.RecordPaidResult(ctxT(t), r, "vr", "/a/x", "")
	wantErr(t, "RecordPaidResult without a SHA-256", err, ErrInvalidInput)
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr", "")
	wantErr(t, "RecordPaidFailure without a reason", err, ErrInvalidInput)
	if got := mustPaidTask(t, l, r); got.State != allot.PaidSubmitted {
		t.Fatalf("invalid calls changed the task: %+v", got)
	}
	if n := countRows(t, l, "operator_decisions"); n != 0 {
		t.Fatalf("invalid decisions wrote %d rows", n)
	}
}

func testCheckPaidClean(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	ok := paidRef(ep, "render", 0)
	mustIntent(t, l, ok)
	mustSubmit(t, l, ok, "vr-ok", 10)
	mustResult(t, l, ok, "vr-ok")
	failed := paidRef(ep, "voice", 0)
	mustIntent(t, l, failed)
	mustSubmit(t, l, failed, "vr-failed", 10)
	mustFailure(t, l, failed, "vr-failed", "boom")
	unknown := paidRef(ep, "music", 0)
	mustIntent(t, l, unknown)
	mustDecide(t, l, abandonReq(ep, "music", "ab", "gave up"))
	// Outcome unknown (sent, no answer) is not a violation, nor is a
	// released task that may have been sent.
	title := paidRef(ep, "title", 0)
	mustIntent(t, l, title)
	mustMarkSending(t, l, title, testOwner)
	cover := paidRef(ep, "cover", 0)
	mustIntent(t, l, cover)
	mustMarkSending(t, l, cover, testOwner)
	if _, err := l.ReleaseIntent(ctxT(t), cover, testOwner, true); err != nil {
		t.Fatal(err)
	}
	mustRework(t, l, ep, "render", "rework")
	mustCheckClean(t, l, "")
	mustCheckClean(t, l, "weekly")
}

// Only the intent's owner sends or releases it; another attempt takes it
// over only from the task as it saw it.
func testPaidOwnership(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	a := mustIntentBy(t, l, r, "attempt-a")
	before := dumpTables(t, l)
	_, err := l.MarkSending(ctxT(t), r, "attempt-b", sendUntil)
	wantErr(t, "MarkSending by another attempt", err, ErrIntentOwned, "render", `"attempt-a"`, `"attempt-b"`)
	_, err = l.ReleaseIntent(ctxT(t), r, "attempt-b", false)
	wantErr(t, "ReleaseIntent by another attempt", err, ErrIntentOwned, `"attempt-a"`)
	stale := a
	stale.Owner = "attempt-x"
	_, err = l.TakeIntent(ctxT(t), stale, "attempt-b", afterSend)
	wantErr(t, "TakeIntent from an owner that is not the owner", err, ErrIntentOwned, `"attempt-a"`)
	mustBeUnchanged(t, l, "calls by a non-owner", before)

	b := mustTakeIntent(t, l, a, "attempt-b")
	wantB := a
	wantB.Owner, wantB.UpdatedAt = "attempt-b", b.UpdatedAt
	if b != wantB || b.UpdatedAt.Before(a.UpdatedAt) {
		t.Fatalf("taken over: %+v, want %+v", b, wantB)
	}
	if got := mustPaidTask(t, l, r); got != b {
		t.Fatalf("stored %+v, TakeIntent returned %+v", got, b)
	}
	// The new owner's retried take-over changes nothing.
	before = dumpTables(t, l)
	if again, err := l.TakeIntent(ctxT(t), a, "attempt-b", afterSend); err != nil || again != b {
		t.Fatalf("TakeIntent retried = %+v, %v; want %+v", again, err, b)
	}
	mustBeUnchanged(t, l, "a retried take-over", before)
	// The old owner lost it, and so did whoever still sees it as a's.
	_, err = l.MarkSending(ctxT(t), r, "attempt-a", sendUntil)
	wantErr(t, "MarkSending by the old owner", err, ErrIntentOwned, `"attempt-b"`)
	_, err = l.ReleaseIntent(ctxT(t), r, "attempt-a", false)
	wantErr(t, "ReleaseIntent by the old owner", err, ErrIntentOwned, `"attempt-b"`)
	_, err = l.TakeIntent(ctxT(t), a, "attempt-c", afterSend)
	wantErr(t, "TakeIntent from the old owner", err, ErrIntentOwned, `"attempt-b"`)
	if got := mustIntentBy(t, l, r, "attempt-c"); got != b {
		t.Fatalf("WriteIntent by a third attempt = %+v, want %+v", got, b)
	}
	mustBeUnchanged(t, l, "calls by former owners", before)

	s := mustMarkSending(t, l, r, "attempt-b")
	if s.Owner != "attempt-b" || !s.MaybeSent {
		t.Fatalf("sending: %+v", s)
	}
	// The vendor's reference is recorded whoever owns the intent: the
	// task found at the vendor by its key is this task's.
	sub, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-1", Amount: 5, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if sub.State != allot.PaidSubmitted || sub.Owner != "" || sub.MaybeSent || sub.ResubmitRequest != "" {
		t.Fatalf("submitted: %+v", sub)
	}
	before = dumpTables(t, l)
	_, err = l.TakeIntent(ctxT(t), sub, "attempt-d", afterSend)
	wantErr(t, "TakeIntent of a submitted task", err, ErrPaidTaskState, "submitted", "intent")
	_, err = l.MarkSending(ctxT(t), r, "attempt-b", sendUntil)
	wantErr(t, "MarkSending of a submitted task", err, ErrPaidTaskState, "submitted", "intent")
	_, err = l.ReleaseIntent(ctxT(t), r, "attempt-b", false)
	wantErr(t, "ReleaseIntent of a submitted task", err, ErrPaidTaskState, "submitted", "intent")
	if got, err := l.EndSend(ctxT(t), r, "attempt-b", t0); err != nil || got != sub {
		t.Fatalf("EndSend of a submitted task = %+v, %v; want it unchanged", got, err)
	}
	mustBeUnchanged(t, l, "owner calls on a submitted task", before)

	// A planned task has no owner: nothing to take over or send.
	v := paidRef(ep, "voice", 0)
	mustIntentBy(t, l, v, "attempt-v")
	planned, err := l.ReleaseIntent(ctxT(t), v, "attempt-v", false)
	if err != nil {
		t.Fatal(err)
	}
	before = dumpTables(t, l)
	_, err = l.TakeIntent(ctxT(t), planned, "attempt-w", afterSend)
	wantErr(t, "TakeIntent of a planned task", err, ErrPaidTaskState, "planned")
	_, err = l.MarkSending(ctxT(t), v, "attempt-w", sendUntil)
	wantErr(t, "MarkSending of a planned task", err, ErrPaidTaskState, "planned")
	mustBeUnchanged(t, l, "owner calls on a planned task", before)
}

// A take-over is decided on a view of the task (owned by another attempt,
// sent or not, until when) and the vendor's answer: if the task changed
// since the view, or the last send may still reach the vendor, it is
// refused and nothing is written.
func testPaidTakeOverNeedsFreshView(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntentBy(t, l, r, "attempt-a")         // A writes the intent
	view := mustIntentBy(t, l, r, "attempt-b") // B sees it owned by A, unsent
	if view.MaybeSent || view.Owner != "attempt-a" || !view.SendingUntil.IsZero() {
		t.Fatalf("B's view: %+v", view)
	}
	mustMarkSending(t, l, r, "attempt-a") // A begins its send after B's read
	before := dumpTables(t, l)
	_, err := l.TakeIntent(ctxT(t), view, "attempt-b", afterSend)
	wantErr(t, "a take-over decided before the owner's send began", err, ErrIntentOwned, `"attempt-a"`)
	_, err = l.MarkSending(ctxT(t), r, "attempt-b", sendUntil)
	wantErr(t, "MarkSending by the attempt that failed to take over", err, ErrIntentOwned)
	mustBeUnchanged(t, l, "a stale take-over", before)

	// B reads again: a send is under way until sendUntil; until then a
	// look-up that finds nothing proves nothing.
	view = mustIntentBy(t, l, r, "attempt-b")
	if !view.MaybeSent || !view.SendingUntil.Equal(sendUntil) || view.Owner != "attempt-a" {
		t.Fatalf("B's second view: %+v", view)
	}
	_, err = l.TakeIntent(ctxT(t), view, "attempt-b", sendUntil.Add(-time.Microsecond))
	wantErr(t, "a take-over while the owner's send is in flight", err, ErrSendInFlight, `"attempt-a"`)
	mustBeUnchanged(t, l, "a take-over during a send", before)

	// A's request failed on its side: the send is over early.
	endAt := t0.Add(10 * time.Minute)
	ended, err := l.EndSend(ctxT(t), r, "attempt-a", endAt)
	if err != nil {
		t.Fatal(err)
	}
	if !ended.SendingUntil.Equal(endAt) || !ended.MaybeSent || ended.Owner != "attempt-a" {
		t.Fatalf("after EndSend: %+v", ended)
	}
	// Only the owner's own send ends, and never later than its deadline.
	before = dumpTables(t, l)
	for name, call := range map[string]func() (PaidTask, error){
		"by another attempt": func() (PaidTask, error) { return l.EndSend(ctxT(t), r, "attempt-b", t0) },
		"at a later time":    func() (PaidTask, error) { return l.EndSend(ctxT(t), r, "attempt-a", endAt.Add(time.Minute)) },
		"at the same time":   func() (PaidTask, error) { return l.EndSend(ctxT(t), r, "attempt-a", endAt) },
	} {
		if got, err := call(); err != nil || got != ended {
			t.Fatalf("EndSend %s = %+v, %v; want %+v unchanged", name, got, err, ended)
		}
	}
	mustBeUnchanged(t, l, "EndSend that ends nothing", before)
	// The view from before EndSend is stale; a fresh one takes over once
	// the send is over (at its end, not before).
	_, err = l.TakeIntent(ctxT(t), view, "attempt-b", afterSend)
	wantErr(t, "a take-over with the deadline from before EndSend", err, ErrIntentOwned)
	_, err = l.TakeIntent(ctxT(t), ended, "attempt-b", endAt.Add(-time.Microsecond))
	wantErr(t, "a take-over just before the ended send's end", err, ErrSendInFlight)
	taken, err := l.TakeIntent(ctxT(t), ended, "attempt-b", endAt)
	if err != nil || taken.Owner != "attempt-b" || !taken.MaybeSent || !taken.SendingUntil.Equal(endAt) {
		t.Fatalf("take-over after the send ended = %+v, %v", taken, err)
	}
	// C decided on the same view at the same time: too late.
	_, err = l.TakeIntent(ctxT(t), ended, "attempt-c", afterSend)
	wantErr(t, "a second take-over from the same view", err, ErrIntentOwned, `"attempt-b"`)
	// A's late EndSend does not touch B's intent.
	before = dumpTables(t, l)
	if got, err := l.EndSend(ctxT(t), r, "attempt-a", t0); err != nil || got.Owner != "attempt-b" || !got.SendingUntil.Equal(endAt) {
		t.Fatalf("EndSend by the old owner = %+v, %v", got, err)
	}
	mustBeUnchanged(t, l, "EndSend by the old owner", before)
	// B sends with a new deadline.
	sent, err := l.MarkSending(ctxT(t), r, "attempt-b", afterSend)
	if err != nil || !sent.SendingUntil.Equal(afterSend) {
		t.Fatalf("B's send = %+v, %v", sent, err)
	}
	// A never-sent intent (no deadline) is taken over at once.
	v := paidRef(ep, "voice", 0)
	vin := mustIntentBy(t, l, v, "attempt-v1")
	if got := mustTakeIntent(t, l, vin, "attempt-v2"); got.Owner != "attempt-v2" || got.MaybeSent {
		t.Fatalf("take-over of an unsent intent: %+v", got)
	}
}

// MaybeSent: set by MarkSending, kept by ReleaseIntent(…, true) and by the
// next WriteIntent, cleared by ReleaseIntent(…, false) and RecordSubmission.
func testPaidMaybeSent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	in := mustIntentBy(t, l, r, "a1")
	if in.MaybeSent || in.OutcomeUnknown() {
		t.Fatalf("a new intent may have been sent: %+v", in)
	}
	if !in.FirstSentAt.IsZero() {
		t.Fatalf("a new intent was sent at %v", in.FirstSentAt)
	}
	beforeSend := time.Now().Add(-time.Second)
	s := mustMarkSending(t, l, r, "a1")
	if !s.MaybeSent || !s.OutcomeUnknown() {
		t.Fatalf("after MarkSending: %+v", s)
	}
	// The first send is recorded, and read back as written: the vendor's
	// idempotency horizon counts from it (issue 24).
	if s.FirstSentAt.Before(beforeSend) || s.FirstSentAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("first sent at %v, want about now", s.FirstSentAt)
	}
	if got := mustPaidTask(t, l, r); !got.FirstSentAt.Equal(s.FirstSentAt) {
		t.Fatalf("first sent at %v, read back %v", s.FirstSentAt, got.FirstSentAt)
	}
	// Marking again (the same attempt) changes nothing.
	before := dumpTables(t, l)
	if again := mustMarkSending(t, l, r, "a1"); again != s {
		t.Fatalf("MarkSending again = %+v, want %+v", again, s)
	}
	mustBeUnchanged(t, l, "MarkSending twice", before)
	// Refused, with an earlier send unanswered: the release keeps it.
	rel, err := l.ReleaseIntent(ctxT(t), r, "a1", true)
	if err != nil {
		t.Fatal(err)
	}
	if rel.State != allot.PaidPlanned || !rel.MaybeSent || rel.OutcomeUnknown() || rel.Owner != "" {
		t.Fatalf("released keeping MaybeSent: %+v", rel)
	}
	// The next attempt's intent still says it may have been sent, so that
	// attempt asks the vendor before sending.
	in2 := mustIntentBy(t, l, r, "a2")
	if in2.State != allot.PaidIntent || in2.Owner != "a2" || !in2.MaybeSent || !in2.OutcomeUnknown() {
		t.Fatalf("intent after a release that kept MaybeSent: %+v", in2)
	}
	// Asked, the vendor had nothing; sent and refused: cleared. A later
	// send keeps the first send's time.
	if again := mustMarkSending(t, l, r, "a2"); !again.FirstSentAt.Equal(s.FirstSentAt) {
		t.Fatalf("a second send moved the first send from %v to %v", s.FirstSentAt, again.FirstSentAt)
	}
	rel2, err := l.ReleaseIntent(ctxT(t), r, "a2", false)
	if err != nil {
		t.Fatal(err)
	}
	if rel2.State != allot.PaidPlanned || rel2.MaybeSent {
		t.Fatalf("released clearing MaybeSent: %+v", rel2)
	}
	if in3 := mustIntentBy(t, l, r, "a3"); in3.MaybeSent || in3.Owner != "a3" {
		t.Fatalf("intent after a release that cleared MaybeSent: %+v", in3)
	}
	mustMarkSending(t, l, r, "a3")
	sub := mustSubmit(t, l, r, "vr-1", 10)
	if sub.MaybeSent || sub.OutcomeUnknown() || sub.Owner != "" {
		t.Fatalf("submitted: %+v", sub)
	}
	// An abandoned intent that may have been sent keeps saying so (the
	// cost, if any, may still come), but its outcome is settled.
	v := paidRef(ep, "voice", 0)
	mustIntentBy(t, l, v, "b1")
	mustMarkSending(t, l, v, "b1")
	mustDecide(t, l, abandonReq(ep, "voice", "ab", "cannot tell"))
	if got := mustPaidTask(t, l, v); got.State != allot.PaidAbandoned || got.OutcomeUnknown() || got.Owner != "" {
		t.Fatalf("abandoned unknown outcome: %+v", got)
	}
	mustCheckClean(t, l, "")
}

// A resubmit decision allows one send without asking the vendor; the send
// (MarkSending) consumes it, and a retried decision does not grant another.
func testPaidResubmitPermission(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntentBy(t, l, r, "a1")
	mustMarkSending(t, l, r, "a1") // and the answer never came
	d := mustDecide(t, l, decision(ep, "resub-1", allot.ActionResubmit, "render"))
	if d.Revision != 0 || d.Action != allot.ActionResubmit {
		t.Fatalf("resubmit decision: %+v", d)
	}
	got := mustPaidTask(t, l, r)
	if got.State != allot.PaidIntent || got.ResubmitRequest != "resub-1" || got.Owner != "a1" || !got.MaybeSent {
		t.Fatalf("after resubmit: %+v", got)
	}
	// The next attempt cannot ask the vendor; the permission lets it take
	// over and send once.
	taken, err := l.TakeIntent(ctxT(t), got, "a2", afterSend)
	if err != nil || taken.ResubmitRequest != "resub-1" || taken.Owner != "a2" {
		t.Fatalf("take-over with the permission = %+v, %v", taken, err)
	}
	sent := mustMarkSending(t, l, r, "a2")
	if sent.ResubmitRequest != "" || !sent.MaybeSent {
		t.Fatalf("the send did not consume the permission: %+v", sent)
	}
	// The retried decision returns the first answer and grants nothing.
	before := dumpTables(t, l)
	if again, applied, err := l.Decide(ctxT(t), decision(ep, "resub-1", allot.ActionResubmit, "render")); err != nil || applied || again != d {
		t.Fatalf("resubmit retried = %+v, %v, %v; want %+v, false", again, applied, err, d)
	}
	mustBeUnchanged(t, l, "a retried resubmit", before)
	// A new decision grants a new one; the submission clears it.
	mustDecide(t, l, decision(ep, "resub-2", allot.ActionResubmit, "render"))
	if got := mustPaidTask(t, l, r); got.ResubmitRequest != "resub-2" {
		t.Fatalf("second resubmit: %+v", got)
	}
	sub := mustSubmit(t, l, r, "vr-1", 10)
	if sub.ResubmitRequest != "" {
		t.Fatalf("submitted with a resubmit permission left: %+v", sub)
	}
	before = dumpTables(t, l)
	_, _, err = l.Decide(ctxT(t), decision(ep, "resub-3", allot.ActionResubmit, "render"))
	wantErr(t, "resubmit of a submitted task", err, ErrPaidTaskState, "submitted", "intent")
	mustBeUnchanged(t, l, "a refused resubmit", before)
	// Abandoning drops the permission with the owner.
	v := paidRef(ep, "voice", 0)
	mustIntentBy(t, l, v, "b1")
	mustDecide(t, l, decision(ep, "resub-v", allot.ActionResubmit, "voice"))
	mustDecide(t, l, abandonReq(ep, "voice", "ab-v", "not worth it"))
	if got := mustPaidTask(t, l, v); got.State != allot.PaidAbandoned || got.ResubmitRequest != "" || got.Owner != "" {
		t.Fatalf("abandoned after a resubmit: %+v", got)
	}
}

// Concurrent take-overs of one intent from the same view: exactly one wins,
// and then only the winner can send.
func testPaidTakeIntentRace(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntentBy(t, l, r, "a0")
	seen := mustMarkSending(t, l, r, "a0") // sent, no answer; its deadline passes
	const n = 16
	taker := func(i int) string { return fmt.Sprintf("t%02d", i) }
	got := make([]PaidTask, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.TakeIntent(ctxT(t), seen, taker(i), afterSend)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		switch {
		case errs[i] == nil:
			if winner >= 0 {
				t.Fatalf("two take-overs from one view succeeded: %s and %s", taker(winner), taker(i))
			}
			winner = i
			if got[i].Owner != taker(i) {
				t.Fatalf("winner %s got %+v", taker(i), got[i])
			}
		case errors.Is(errs[i], ErrIntentOwned):
		default:
			t.Fatalf("take-over %d: %v", i, errs[i])
		}
	}
	if winner < 0 {
		t.Fatal("no take-over succeeded")
	}
	if stored := mustPaidTask(t, l, r); stored.Owner != taker(winner) {
		t.Fatalf("stored owner %q, winner %s", stored.Owner, taker(winner))
	}

	// Everybody tries to send: only the owner may.
	sent := make([]bool, n+1)
	start = make(chan struct{})
	for i := range n + 1 {
		wg.Go(func() {
			<-start
			owner := "a0"
			if i < n {
				owner = taker(i)
			}
			_, err := l.MarkSending(ctxT(t), r, owner, afterSend.Add(time.Hour))
			switch {
			case err == nil:
				sent[i] = true
			case !errors.Is(err, ErrIntentOwned):
				errs[i%n] = err
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n + 1 {
		if sent[i] != (i == winner) {
			t.Fatalf("attempt %d sent %v; only the owner %s may send (errors %v)", i, sent[i], taker(winner), errs)
		}
	}
}

func testCheckPaidTampered(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	day := alloc(t, l, "daily", "k", "2026-08-03", 0).Episode
	good := paidRef(ep, "render", 0)
	mustIntent(t, l, good)
	mustSubmit(t, l, good, "vr-ok", 100)
	mustCheckClean(t, l, "")

	rawExec(t, l, `DROP INDEX paid_tasks_remote_ref_uniq`)
	rawExec(t, l, `DROP INDEX paid_tasks_idempotency_key_uniq`)
	// Submitted without a remote reference.
	rawInsertPaidTask(t, l, paidRef(ep, "voice", 0), "k-voice", "submitted", "")
	// One remote reference on two tasks, in two pipelines.
	rawInsertPaidTask(t, l, paidRef(ep, "music", 0), "k-music", "succeeded", "vr-dup")
	rawInsertPaidTask(t, l, paidRef(day, "music", 0), "k-day-music", "succeeded", "vr-dup")
	// One idempotency key on two tasks.
	rawInsertPaidTask(t, l, paidRef(ep, "title", 0), "k-dup", "intent", "")
	rawInsertPaidTask(t, l, paidRef(ep, "title", 1), "k-dup", "intent", "")
	// A cost entry with no paid task.
	rawInsertCost(t, l, "vr-orphan", paidRef(ep, "render", 5), 999)
	// A cost entry booked to another task than the reference's.
	rawInsertPaidTask(t, l, paidRef(ep, "cover", 0), "k-cover", "submitted", "vr-cover")
	rawInsertCost(t, l, "vr-cover", good, 5)

	vs, err := l.Check(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		inv      int
		pipeline string
		parts    []string
	}{
		{7, "weekly", []string{`"voice"`, "submitted without a remote reference", "k-voice"}},
		{7, "weekly", []string{"remote reference", `"vr-dup"`, `"music"`, "weekly/2026-W32-0", "daily/2026-08-03-0"}},
		{7, "daily", []string{"remote reference", `"vr-dup"`, "weekly/2026-W32-0", "daily/2026-08-03-0"}},
		{7, "weekly", []string{"idempotency key", `"k-dup"`, "revision 0", "revision 1"}},
		{8, "weekly", []string{`"vr-orphan"`, "no paid task"}},
		{8, "weekly", []string{`"vr-cover"`, `"render"`, `"cover"`}},
	}
	if len(vs) != len(want) {
		t.Fatalf("Check reported %d violations, want %d:\n%v", len(vs), len(want), strings.ReplaceAll(fmt.Sprint(vs), "} {", "}\n{"))
	}
	for _, w := range want {
		found := false
		for _, v := range vs {
			if v.Invariant != w.inv || v.Pipeline != w.pipeline {
				continue
			}
			ok := true
			for _, p := range w.parts {
				ok = ok && strings.Contains(v.Detail, p)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no invariant-%d violation in %s naming %v in %v", w.inv, w.pipeline, w.parts, vs)
		}
	}
	if vs, err := l.Check(ctxT(t), "daily"); err != nil || len(vs) != 1 || vs[0].Invariant != 7 {
		t.Fatalf("Check(daily) = %v, %v; want the shared reference only", vs, err)
	}
	if vs, err := l.Check(ctxT(t), "weekly"); err != nil || len(vs) != 5 {
		t.Fatalf("Check(weekly) = %v, %v; want 5 violations", vs, err)
	}
}

// An existing v1 ledger (episodes, steps, no paid tables) is migrated to the
// current schema by Open, keeping its data; OpenReadOnly refuses it until then.
func testMigrateV1ToV2(t *testing.T, url string) {
	ctx := ctxT(t)
	v1 := ledgerAtVersion(t, url, 1)
	// Raw SQL: this build's Allocate reads episode columns that v1 lacks.
	rawInsertEpisode(t, v1, "weekly", "2026-W32-0", "2026-W32", 0, "k")
	ep := Episode{Pipeline: "weekly", ID: "2026-W32-0", Period: "2026-W32", Sequence: 0, AllocationKey: "k",
		NominalTime: t0, CreatedAt: t0, Status: EpisodeAllocated}
	rawInsertStep(t, v1, "weekly", ep.ID, "plan", "completed") // RecordStep writes v5 columns
	if n := countRows(t, v1, "schema_migrations"); n != 1 {
		t.Fatalf("v1 ledger has %d migrations recorded", n)
	}
	if _, err := v1.w.ExecContext(ctx, `SELECT 1 FROM paid_tasks`); err == nil {
		t.Fatal("a v1 ledger already has paid_tasks")
	}
	if err := v1.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctx, url)
	if err == nil {
		_ = ro.Close()
		t.Fatal("OpenReadOnly accepted a v1 ledger")
	}
	if !strings.Contains(err.Error(), "schema version 1") {
		t.Errorf("OpenReadOnly(v1) = %v, want it to name the old version", err)
	}

	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	got, err := l.Episode(ctx, "weekly", ep.ID)
	if err != nil || got != ep {
		t.Fatalf("episode after migration = %+v, %v; want %+v", got, err, ep)
	}
	if steps, err := l.Steps(ctx, "weekly", ep.ID); err != nil || len(steps) != 1 {
		t.Fatalf("steps after migration = %+v, %v", steps, err)
	}
	// Paid work on the old episode.
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	mustSubmit(t, l, r, "vr-1", 10)
	mustResult(t, l, r, "vr-1")
	mustCheckClean(t, l, "")
	// Opening again applies nothing more.
	mustBeAtLatestVersion(t, openURLT(t, url))
}

// testPaidReleaseEndsTheSend: a send the vendor refused is over, whatever
// deadline MarkSending gave it, so the next attempt may ask the vendor at
// once instead of waiting out the window (invariant 7 still holds: the
// refusal was an answer, nothing of this send can still arrive).
func testPaidReleaseEndsTheSend(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntentBy(t, l, r, "a1")
	if _, err := l.MarkSending(ctxT(t), r, "a1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	rel, err := l.ReleaseIntent(ctxT(t), r, "a1", true)
	if err != nil {
		t.Fatal(err)
	}
	if rel.SendingUntil.After(time.Now()) || !rel.MaybeSent {
		t.Fatalf("after a refused send the task is %+v: want its send window closed (now) and MaybeSent kept", rel)
	}
}
