package ledger

import (
	"allot"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Conformance tests for paid tasks (invariant 7), cost entries (invariant 8),
// operator decisions and step resets; registered in runConformance so that
// both drivers run them.

func paidRef(ep Episode, step string, rev int) PaidTaskRef {
	return PaidTaskRef{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: step, Revision: rev}
}

// testKey stands in for the name-based UUID the activities derive.
func testKey(r PaidTaskRef) string {
	return fmt.Sprintf("key/%s/%s/%s/%d", r.Pipeline, r.EpisodeID, r.Step, r.Revision)
}

func mustIntent(t *testing.T, l *Ledger, r PaidTaskRef) PaidTask {
	t.Helper()
	pt, err := l.WriteIntent(ctxT(t), r, testKey(r))
	if err != nil {
		t.Fatalf("WriteIntent(%+v): %v", r, err)
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
		in.CreatedAt.IsZero() || !in.UpdatedAt.Equal(in.CreatedAt) || in.RequestID != "" {
		t.Fatalf("intent: %+v", in)
	}
	if got := mustPaidTask(t, l, r); got != in {
		t.Fatalf("PaidTask after intent = %+v, want %+v", got, in)
	}

	sub := mustSubmit(t, l, r, "vr-1", 1250)
	if sub.State != allot.PaidSubmitted || sub.RemoteRef != "vr-1" || sub.IdempotencyKey != in.IdempotencyKey ||
		!sub.CreatedAt.Equal(in.CreatedAt) || sub.UpdatedAt.Before(in.UpdatedAt) {
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
	_, err := l.WriteIntent(ctxT(t), missing, testKey(missing))
	wantErr(t, "WriteIntent on an empty ledger", err, ErrEpisodeNotFound, `"weekly"`, "2026-W32-0")

	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	other := PaidTaskRef{Pipeline: "weekly", EpisodeID: "2026-W32-5", Step: "render"}
	_, err = l.WriteIntent(ctxT(t), other, testKey(other))
	wantErr(t, "WriteIntent on a missing episode", err, ErrEpisodeNotFound, "2026-W32-5")
	_, err = l.WriteIntent(ctxT(t), PaidTaskRef{Pipeline: "weekly", Step: "render"}, "key")
	wantErr(t, "WriteIntent without an episode ID", err, ErrEpisodeNotFound)
	// Same ID in another pipeline is another episode.
	_, err = l.WriteIntent(ctxT(t), paidRef(Episode{Pipeline: "daily", ID: ep.ID}, "render", 0), "key-daily")
	wantErr(t, "WriteIntent in another pipeline", err, ErrEpisodeNotFound, `"daily"`)
	if n := countRows(t, l, "paid_tasks"); n != 0 {
		t.Fatalf("WriteIntent on missing episodes wrote %d paid tasks", n)
	}

	_, err = l.PaidTasks(ctxT(t), "weekly", "2026-W32-5")
	wantErr(t, "PaidTasks of a missing episode", err, ErrEpisodeNotFound)
	if ts, err := l.PaidTasks(ctxT(t), "weekly", ep.ID); err != nil || len(ts) != 0 {
		t.Fatalf("PaidTasks of a new episode = %+v, %v", ts, err)
	}
	_, err = l.PaidTask(ctxT(t), paidRef(ep, "render", 0))
	wantErr(t, "PaidTask never written", err, ErrPaidTaskNotFound, "render")
	_, err = l.LatestPaidTask(ctxT(t), "weekly", ep.ID, "render")
	wantErr(t, "LatestPaidTask of a step without tasks", err, ErrPaidTaskNotFound, "render")
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: paidRef(ep, "render", 0), RemoteRef: "vr", Amount: 1, Currency: "EUR"})
	wantErr(t, "RecordSubmission without an intent", err, ErrPaidTaskNotFound)
	_, err = l.PlanRevision(ctxT(t), "weekly", "2026-W32-5", "render", "req")
	wantErr(t, "PlanRevision on a missing episode", err, ErrEpisodeNotFound)
	_, _, err = l.RecordDecision(ctxT(t), OperatorDecision{RequestID: "u", Pipeline: "weekly", EpisodeID: "2026-W32-5", Action: allot.ActionApprove})
	wantErr(t, "RecordDecision on a missing episode", err, ErrEpisodeNotFound)
	for _, table := range []string{"paid_tasks", "cost_entries", "operator_decisions"} {
		if n := countRows(t, l, table); n != 0 {
			t.Fatalf("%s has %d rows after refused calls", table, n)
		}
	}
}

func testPaidRetryResumes(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	first := mustIntent(t, l, r)
	// A retry before the vendor answered sees its own intent, unchanged.
	if again := mustIntent(t, l, r); again != first {
		t.Fatalf("second WriteIntent = %+v, want %+v", again, first)
	}
	// A key never changes.
	_, err := l.WriteIntent(ctxT(t), r, "another-key")
	wantErr(t, "WriteIntent with another key", err, ErrInvalidInput, testKey(r), "another-key")
	if got := mustPaidTask(t, l, r); got != first {
		t.Fatalf("a refused WriteIntent changed the task: %+v", got)
	}
	// A key belongs to one task.
	voice := paidRef(ep, "voice", 0)
	_, err = l.WriteIntent(ctxT(t), voice, testKey(r))
	wantErr(t, "WriteIntent with another task's key", err, ErrInvalidInput, "render")
	if _, err := l.PaidTask(ctxT(t), voice); !errors.Is(err, ErrPaidTaskNotFound) {
		t.Fatalf("a refused WriteIntent wrote a task: %v", err)
	}

	sub := mustSubmit(t, l, r, "vr-1", 500)
	// A retry after the reference was written resumes from it.
	resumed := mustIntent(t, l, r)
	if resumed != sub || resumed.State != allot.PaidSubmitted || resumed.RemoteRef != "vr-1" {
		t.Fatalf("WriteIntent after submission = %+v, want the submitted task %+v", resumed, sub)
	}
	done := mustResult(t, l, r, "vr-1")
	if got := mustIntent(t, l, r); got != done {
		t.Fatalf("WriteIntent after the result = %+v, want %+v", got, done)
	}
	if n := countRows(t, l, "paid_tasks"); n != 1 {
		t.Fatalf("%d paid tasks, want 1", n)
	}
}

func testPaidConcurrentIntent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	const n = 20
	got := make([]PaidTask, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.WriteIntent(ctxT(t), r, testKey(r))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] || got[i].State != allot.PaidIntent {
			t.Fatalf("caller %d got %+v, caller 0 got %+v", i, got[i], got[0])
		}
	}
	if c := countRows(t, l, "paid_tasks"); c != 1 {
		t.Fatalf("%d paid tasks after concurrent intents, want 1", c)
	}
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

	// A reference belongs to one task.
	voice := paidRef(ep, "voice", 0)
	vin := mustIntent(t, l, voice)
	_, err = l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: voice, RemoteRef: "vr-1", Amount: 10, Currency: "EUR"})
	wantErr(t, "RecordSubmission with another task's reference", err, ErrRemoteRefConflict, "vr-1")
	if got := mustPaidTask(t, l, voice); got != vin {
		t.Fatalf("a refused submission changed the other task: %+v", got)
	}
	if got := mustCosts(t, l, "weekly", ""); !slices.Equal(got, costs) {
		t.Fatalf("a refused submission changed the costs: %+v", got)
	}

	_, err = l.RecordPaidResult(ctxT(t), r, "vr-2", "/a/x", "sha")
	wantErr(t, "RecordPaidResult with another reference", err, ErrRemoteRefConflict)
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr-2", "boom")
	wantErr(t, "RecordPaidFailure with another reference", err, ErrRemoteRefConflict)

	// Nothing is sent for a planned revision, so nothing can be recorded.
	planned, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "music", "req-1")
	if err != nil {
		t.Fatal(err)
	}
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

func testPlanRevision(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	// With no task yet the first revision is 0.
	music, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "music", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	if music.PaidTaskRef != paidRef(ep, "music", 0) || music.State != allot.PaidPlanned || music.RequestID != "req-a" || music.IdempotencyKey != "" {
		t.Fatalf("first planned revision: %+v", music)
	}

	r0 := paidRef(ep, "render", 0)
	mustIntent(t, l, r0)
	before := countRows(t, l, "paid_tasks")
	_, err = l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-a")
	wantErr(t, "PlanRevision while the outcome is unknown", err, ErrPaidTaskState, "render", "revision 0", "intent", "rework")
	mustSubmit(t, l, r0, "vr-0", 100)
	_, err = l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-a")
	wantErr(t, "PlanRevision while submitted", err, ErrPaidTaskState, "submitted")
	if n := countRows(t, l, "paid_tasks"); n != before {
		t.Fatalf("refused PlanRevision wrote: %d -> %d paid tasks", before, n)
	}
	mustResult(t, l, r0, "vr-0")

	rev1, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-a")
	if err != nil {
		t.Fatal(err)
	}
	if rev1.PaidTaskRef != paidRef(ep, "render", 1) || rev1.State != allot.PaidPlanned || rev1.RequestID != "req-a" {
		t.Fatalf("rework revision: %+v", rev1)
	}
	// The activity's retry gets the same revision back.
	if again, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-a"); err != nil || again != rev1 {
		t.Fatalf("PlanRevision retried = %+v, %v; want %+v", again, err, rev1)
	}
	// A new request is a new revision.
	rev2, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-b")
	if err != nil {
		t.Fatal(err)
	}
	if rev2.Revision != 2 || rev2.RequestID != "req-b" {
		t.Fatalf("second rework: %+v", rev2)
	}
	if again, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-a"); err != nil || again != rev1 {
		t.Fatalf("PlanRevision(req-a) after req-b = %+v, %v; want %+v", again, err, rev1)
	}
	// Planning then sending: the planned revision gets its own key.
	r2 := paidRef(ep, "render", 2)
	in2 := mustIntent(t, l, r2)
	if in2.State != allot.PaidIntent || in2.IdempotencyKey != testKey(r2) || in2.RequestID != "req-b" || !in2.CreatedAt.Equal(rev2.CreatedAt) {
		t.Fatalf("intent of a planned revision: %+v", in2)
	}
	if got, err := l.LatestPaidTask(ctxT(t), "weekly", ep.ID, "render"); err != nil || got != in2 {
		t.Fatalf("LatestPaidTask = %+v, %v; want %+v", got, err, in2)
	}
	// An older revision left in flight also blocks a rework.
	if m1, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "music", "req-m1"); err != nil || m1.Revision != 1 {
		t.Fatalf("PlanRevision over a planned revision = %+v, %v", m1, err)
	}
	mustIntent(t, l, paidRef(ep, "music", 0))
	_, err = l.PlanRevision(ctxT(t), "weekly", ep.ID, "music", "req-m2")
	wantErr(t, "PlanRevision while an older revision is intent", err, ErrPaidTaskState, `"music" revision 0`, "intent")
	// Request IDs are per step.
	voice, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "voice", "req-a")
	if err != nil || voice.PaidTaskRef != paidRef(ep, "voice", 0) {
		t.Fatalf("PlanRevision(voice, req-a) = %+v, %v", voice, err)
	}

	ts, err := l.PaidTasks(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, pt := range ts {
		order = append(order, fmt.Sprintf("%s/%d", pt.Step, pt.Revision))
	}
	if want := []string{"music/0", "music/1", "render/0", "render/1", "render/2", "voice/0"}; !slices.Equal(order, want) {
		t.Fatalf("PaidTasks order = %v, want %v", order, want)
	}
	mustCheckClean(t, l, "")
}

func testPlanRevisionConcurrent(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r0 := paidRef(ep, "render", 0)
	mustIntent(t, l, r0)
	mustSubmit(t, l, r0, "vr-0", 100)
	mustResult(t, l, r0, "vr-0")

	// The same request from several retries: one revision.
	const n = 10
	got := make([]PaidTask, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-same")
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] || got[i].Revision != 1 {
			t.Fatalf("caller %d got %+v, caller 0 got %+v", i, got[i], got[0])
		}
	}
	// Distinct requests at once: distinct, dense revisions.
	const m = 5
	revs := make([]int, m)
	start = make(chan struct{})
	for i := range m {
		wg.Go(func() {
			<-start
			pt, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", fmt.Sprintf("req-%d", i))
			errs[i], revs[i] = err, pt.Revision
		})
	}
	close(start)
	wg.Wait()
	for i := range m {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
	}
	slices.Sort(revs)
	if want := []int{2, 3, 4, 5, 6}; !slices.Equal(revs, want) {
		t.Fatalf("revisions %v, want %v", revs, want)
	}
	if c := countRows(t, l, "paid_tasks"); c != 2+m {
		t.Fatalf("%d paid tasks, want %d", c, 2+m)
	}
}

func testResetIntentAndAbandon(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	_, err := l.ResetIntent(ctxT(t), r)
	wantErr(t, "ResetIntent of a task never written", err, ErrPaidTaskNotFound)

	in := mustIntent(t, l, r)
	// resolve --resubmit: back to planned, same key.
	reset, err := l.ResetIntent(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if reset.State != allot.PaidPlanned || reset.IdempotencyKey != in.IdempotencyKey || reset.RemoteRef != "" {
		t.Fatalf("reset: %+v", reset)
	}
	if again, err := l.ResetIntent(ctxT(t), r); err != nil || again != reset {
		t.Fatalf("ResetIntent of a planned task = %+v, %v; want %+v unchanged", again, err, reset)
	}
	_, err = l.Abandon(ctxT(t), r, "no")
	wantErr(t, "Abandon of a planned task", err, ErrPaidTaskState, "planned")
	_, err = l.WriteIntent(ctxT(t), r, "another-key")
	wantErr(t, "WriteIntent of a reset task with another key", err, ErrInvalidInput)
	if in2 := mustIntent(t, l, r); in2.State != allot.PaidIntent || in2.IdempotencyKey != in.IdempotencyKey {
		t.Fatalf("intent after reset: %+v", in2)
	}

	// resolve --abandon.
	_, err = l.Abandon(ctxT(t), r, "")
	wantErr(t, "Abandon without a reason", err, ErrInvalidInput)
	ab, err := l.Abandon(ctxT(t), r, "vendor cannot tell; operator gave up")
	if err != nil {
		t.Fatal(err)
	}
	if ab.State != allot.PaidAbandoned || ab.Error != "vendor cannot tell; operator gave up" {
		t.Fatalf("abandoned: %+v", ab)
	}
	if again, err := l.Abandon(ctxT(t), r, "other reason"); err != nil || again != ab {
		t.Fatalf("Abandon again = %+v, %v; want %+v unchanged", again, err, ab)
	}
	_, err = l.ResetIntent(ctxT(t), r)
	wantErr(t, "ResetIntent of an abandoned task", err, ErrPaidTaskState, "abandoned")
	if got := mustIntent(t, l, r); got != ab {
		t.Fatalf("WriteIntent of an abandoned task = %+v, want %+v", got, ab)
	}
	// An abandoned revision can be reworked.
	if rev, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "req-1"); err != nil || rev.Revision != 1 {
		t.Fatalf("PlanRevision after abandon = %+v, %v", rev, err)
	}

	// Only an unknown outcome is settled this way.
	v := paidRef(ep, "voice", 0)
	mustIntent(t, l, v)
	sub := mustSubmit(t, l, v, "vr-v", 10)
	_, err = l.ResetIntent(ctxT(t), v)
	wantErr(t, "ResetIntent of a submitted task", err, ErrPaidTaskState, "voice", "submitted", "intent without a remote reference")
	_, err = l.Abandon(ctxT(t), v, "why not")
	wantErr(t, "Abandon of a submitted task", err, ErrPaidTaskState, "submitted")
	if got := mustPaidTask(t, l, v); got != sub {
		t.Fatalf("submitted task changed: %+v", got)
	}
	mustCheckClean(t, l, "")
}

func testDecisions(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	other := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	at := time.Date(2026, 8, 4, 12, 0, 0, 0, time.UTC)

	rework := OperatorDecision{RequestID: "upd-1", Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Revision: 1,
		Action: allot.ActionRework, Reason: "too dark", At: at}
	got, inserted, err := l.RecordDecision(ctxT(t), rework)
	if err != nil || !inserted || got != rework {
		t.Fatalf("RecordDecision = %+v, %v, %v; want %+v, true", got, inserted, err, rework)
	}
	// The retried update: the stored decision, nothing written.
	retry := rework
	retry.Reason, retry.At = "changed my mind", at.Add(time.Hour)
	got, inserted, err = l.RecordDecision(ctxT(t), retry)
	if err != nil || inserted || got != rework {
		t.Fatalf("RecordDecision retried = %+v, %v, %v; want %+v, false", got, inserted, err, rework)
	}
	if n := countRows(t, l, "operator_decisions"); n != 1 {
		t.Fatalf("%d decisions after a retried one, want 1", n)
	}

	approve, inserted, err := l.RecordDecision(ctxT(t), OperatorDecision{RequestID: "upd-2", Pipeline: "weekly", EpisodeID: ep.ID, Action: allot.ActionApprove})
	if err != nil || !inserted || approve.At.IsZero() || approve.At.Location() != time.UTC {
		t.Fatalf("approve: %+v, %v, %v", approve, inserted, err)
	}
	earlier := OperatorDecision{RequestID: "upd-0", Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Action: allot.ActionAdopt,
		RemoteRef: "vr-9", Reason: "found it in the vendor console", At: at.Add(-time.Hour)}
	if _, _, err := l.RecordDecision(ctxT(t), earlier); err != nil {
		t.Fatal(err)
	}
	// The same update ID in another episode's workflow is another decision.
	if _, inserted, err := l.RecordDecision(ctxT(t), OperatorDecision{RequestID: "upd-1", Pipeline: "weekly", EpisodeID: other.ID, Action: allot.ActionReject, Reason: "off topic"}); err != nil || !inserted {
		t.Fatalf("same request ID in another episode: %v, %v", inserted, err)
	}

	ds, err := l.Decisions(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []OperatorDecision{earlier, rework, approve}; !slices.Equal(ds, want) {
		t.Fatalf("Decisions =\n%+v\nwant\n%+v", ds, want)
	}
	_, err = l.Decisions(ctxT(t), "weekly", "2026-W32-9")
	wantErr(t, "Decisions of a missing episode", err, ErrEpisodeNotFound)

	before := countRows(t, l, "operator_decisions")
	for name, d := range map[string]OperatorDecision{
		"unknown action":   {RequestID: "x1", Pipeline: "weekly", EpisodeID: ep.ID, Action: "delete"},
		"no request ID":    {Pipeline: "weekly", EpisodeID: ep.ID, Action: allot.ActionApprove},
		"rework, no step":  {RequestID: "x2", Pipeline: "weekly", EpisodeID: ep.ID, Action: allot.ActionRework},
		"adopt, no ref":    {RequestID: "x3", Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Action: allot.ActionAdopt},
		"negative rev":     {RequestID: "x4", Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Action: allot.ActionResubmit, Revision: -1},
		"no pipeline":      {RequestID: "x5", EpisodeID: ep.ID, Action: allot.ActionApprove},
		"empty action":     {RequestID: "x6", Pipeline: "weekly", EpisodeID: ep.ID},
		"capitalised verb": {RequestID: "x7", Pipeline: "weekly", EpisodeID: ep.ID, Action: "Approve"},
	} {
		if _, _, err := l.RecordDecision(ctxT(t), d); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", name, err)
		}
	}
	if n := countRows(t, l, "operator_decisions"); n != before {
		t.Fatalf("invalid decisions wrote: %d -> %d", before, n)
	}
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
	if _, err := l.PlanRevision(ctxT(t), "weekly", w32.ID, "render", "rework-1"); err != nil {
		t.Fatal(err)
	}
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

func testResetSteps(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	at := time.Date(2026, 8, 3, 10, 0, 0, 0, time.UTC)
	for i, step := range []string{"plan", "assemble", "approval", "publish"} {
		if err := l.RecordStep(ctxT(t), StepRecord{Pipeline: "weekly", EpisodeID: ep.ID, Step: step, Status: "completed", CompletedAt: at.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ResetSteps(ctxT(t), "weekly", ep.ID, []string{"assemble", "approval", "publish", "never-ran"}); err != nil {
		t.Fatal(err)
	}
	steps, err := l.Steps(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].Step != "plan" {
		t.Fatalf("steps after reset = %+v, want only plan", steps)
	}
	// Idempotent, and an empty list is fine.
	if err := l.ResetSteps(ctxT(t), "weekly", ep.ID, []string{"assemble"}); err != nil {
		t.Fatal(err)
	}
	if err := l.ResetSteps(ctxT(t), "weekly", ep.ID, nil); err != nil {
		t.Fatal(err)
	}
	err = l.ResetSteps(ctxT(t), "weekly", "2026-W32-9", []string{"assemble"})
	wantErr(t, "ResetSteps of a missing episode", err, ErrEpisodeNotFound)
	err = l.ResetSteps(ctxT(t), "weekly", ep.ID, []string{"plan", ""})
	wantErr(t, "ResetSteps with an empty name", err, ErrInvalidInput)
	if steps, _ := l.Steps(ctxT(t), "weekly", ep.ID); len(steps) != 1 {
		t.Fatalf("a refused reset deleted steps: %+v", steps)
	}
}

func testPaidInvalidInput(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	for name, bad := range map[string]PaidTaskRef{
		"no pipeline":      {EpisodeID: ep.ID, Step: "render"},
		"no step":          {Pipeline: "weekly", EpisodeID: ep.ID},
		"negative version": {Pipeline: "weekly", EpisodeID: ep.ID, Step: "render", Revision: -1},
	} {
		if _, err := l.WriteIntent(ctxT(t), bad, "key"); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("WriteIntent, %s: got %v, want ErrInvalidInput", name, err)
		}
		if _, err := l.PaidTask(ctxT(t), bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("PaidTask, %s: got %v, want ErrInvalidInput", name, err)
		}
	}
	_, err := l.WriteIntent(ctxT(t), r, "")
	wantErr(t, "WriteIntent without a key", err, ErrInvalidInput)
	in := mustIntent(t, l, r)
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
		t.Fatalf("invalid submissions changed the task: %+v", got)
	}
	if n := countRows(t, l, "cost_entries"); n != 0 {
		t.Fatalf("invalid submissions wrote %d cost entries", n)
	}
	_, err = l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "")
	wantErr(t, "PlanRevision without a request ID", err, ErrInvalidInput)
	_, err = l.PlanRevision(ctxT(t), "weekly", ep.ID, "", "req")
	wantErr(t, "PlanRevision without a step", err, ErrInvalidInput)
	mustSubmit(t, l, r, "vr", 1)
	_, err = l.RecordPaidResult(ctxT(t), r, "vr", "/a/x", "")
	wantErr(t, "RecordPaidResult without a SHA-256", err, ErrInvalidInput)
	_, err = l.RecordPaidFailure(ctxT(t), r, "vr", "")
	wantErr(t, "RecordPaidFailure without a reason", err, ErrInvalidInput)
	if got := mustPaidTask(t, l, r); got.State != allot.PaidSubmitted {
		t.Fatalf("invalid calls changed the task: %+v", got)
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
	if _, err := l.RecordPaidFailure(ctxT(t), failed, "vr-failed", "boom"); err != nil {
		t.Fatal(err)
	}
	unknown := paidRef(ep, "music", 0)
	mustIntent(t, l, unknown)
	if _, err := l.Abandon(ctxT(t), unknown, "gave up"); err != nil {
		t.Fatal(err)
	}
	mustIntent(t, l, paidRef(ep, "title", 0)) // outcome unknown is not a violation
	if _, err := l.PlanRevision(ctxT(t), "weekly", ep.ID, "render", "rework"); err != nil {
		t.Fatal(err)
	}
	mustCheckClean(t, l, "")
	mustCheckClean(t, l, "weekly")
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
	if err := v1.RecordStep(ctx, StepRecord{Pipeline: "weekly", EpisodeID: ep.ID, Step: "plan", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
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
