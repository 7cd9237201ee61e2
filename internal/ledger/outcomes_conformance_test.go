package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// Conformance tests for episode outcomes and the outcome counts (invariant
// 10); registered in runConformance so that both drivers run them.

func mustEpisodeOutcome(t *testing.T, l *Ledger, pipeline, episodeID string, outcome allot.Outcome, reason string, at time.Time) {
	t.Helper()
	if err := l.RecordEpisodeOutcome(ctxT(t), pipeline, episodeID, outcome, reason, at); err != nil {
		t.Fatalf("RecordEpisodeOutcome(%s, %s, %s, %s): %v", pipeline, episodeID, outcome, reason, err)
	}
}

func mustEpisode(t *testing.T, l *Ledger, pipeline, episodeID string) Episode {
	t.Helper()
	ep, err := l.Episode(ctxT(t), pipeline, episodeID)
	if err != nil {
		t.Fatalf("Episode(%s, %s): %v", pipeline, episodeID, err)
	}
	return ep
}

// outcomeAt reads the stored time of an episode's current outcome, which
// the API does not return.
func outcomeAt(t *testing.T, l *Ledger, pipeline, episodeID string) time.Time {
	t.Helper()
	var at time.Time
	if err := l.w.QueryRowContext(ctxT(t), l.d.q(`SELECT outcome_at FROM episodes WHERE pipeline = ? AND episode_id = ?`),
		pipeline, episodeID).Scan(dbTime{&at}); err != nil {
		t.Fatalf("outcome_at of %s/%s: %v", pipeline, episodeID, err)
	}
	return at
}

func setCreatedAt(t *testing.T, l *Ledger, pipeline, episodeID string, at time.Time) {
	t.Helper()
	rawExec(t, l, `UPDATE episodes SET created_at = ? WHERE pipeline = ? AND episode_id = ?`, l.d.timeArg(at), pipeline, episodeID)
}

// oc is shorthand for an expected OutcomeCount.
func oc(outcome allot.Outcome, reason string, n int) OutcomeCount {
	return OutcomeCount{Outcome: outcome, Reason: reason, Count: n}
}

func wantCounts(t *testing.T, what string, got []OutcomeCount, err error, want ...OutcomeCount) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s =\n%v\nwant\n%v", what, got, want)
	}
}

func testEpisodeOutcomes(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	if ep.Outcome != "" || ep.OutcomeReason != "" {
		t.Fatalf("a new episode has outcome %q/%q, want none", ep.Outcome, ep.OutcomeReason)
	}
	if at := outcomeAt(t, l, "weekly", ep.ID); !at.IsZero() {
		t.Fatalf("a new episode has outcome time %v", at)
	}
	if b, err := json.Marshal(ep); err != nil || strings.Contains(string(b), "outcome") {
		t.Fatalf("JSON of an episode without outcome = %s, %v; want no outcome fields", b, err)
	}

	at := time.Date(2026, 8, 3, 10, 0, 0, 0, time.UTC)
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "needs_attention", "OutcomeUnknown", at)
	want := ep
	want.Outcome, want.OutcomeReason, want.OutcomeAt = "needs_attention", "OutcomeUnknown", at
	// Every read of episodes carries the outcome and since when.
	if got := mustEpisode(t, l, "weekly", ep.ID); got != want {
		t.Fatalf("Episode = %+v, want %+v", got, want)
	}
	if got, err := l.EpisodeByKey(ctxT(t), "weekly", "k"); err != nil || got != want {
		t.Fatalf("EpisodeByKey = %+v, %v; want %+v", got, err, want)
	}
	if got, err := l.ListEpisodes(ctxT(t), "weekly", ""); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("ListEpisodes = %+v, %v; want [%+v]", got, err, want)
	}
	if r := alloc(t, l, "weekly", "k", "2026-W32", 0); r.Decision != DecisionReused || r.Episode != want {
		t.Fatalf("Allocate (reused) = %+v, want %+v", r, want)
	}
	if got := outcomeAt(t, l, "weekly", ep.ID); !got.Equal(at) {
		t.Fatalf("outcome time %v, want %v", got, at)
	}
	if b, err := json.Marshal(want); err != nil ||
		!strings.Contains(string(b), `"outcome":"needs_attention"`) || !strings.Contains(string(b), `"outcome_reason":"OutcomeUnknown"`) {
		t.Fatalf("JSON of an episode with an outcome = %s, %v", b, err)
	}

	// The same report again, later (a retried activity): nothing moves.
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "needs_attention", "OutcomeUnknown", at.Add(time.Hour))
	if got := outcomeAt(t, l, "weekly", ep.ID); !got.Equal(at) {
		t.Fatalf("repeating the outcome moved its time to %v, want %v", got, at)
	}
	if got := mustEpisode(t, l, "weekly", ep.ID); got != want {
		t.Fatalf("after a repeated report: %+v, want %+v", got, want)
	}

	// A new reason with the same outcome is a change.
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "needs_attention", "OperatorHold", at.Add(2*time.Hour))
	if got := mustEpisode(t, l, "weekly", ep.ID); got.Outcome != "needs_attention" || got.OutcomeReason != "OperatorHold" {
		t.Fatalf("after a new reason: %+v", got)
	}
	if got := outcomeAt(t, l, "weekly", ep.ID); !got.Equal(at.Add(2 * time.Hour)) {
		t.Fatalf("a new reason left the time at %v", got)
	}
	if got := mustEpisode(t, l, "weekly", ep.ID); !got.OutcomeAt.Equal(at.Add(2 * time.Hour)) {
		t.Fatalf("Episode.OutcomeAt after a new reason = %v, want %v", got.OutcomeAt, at.Add(2*time.Hour))
	}

	// A report older than the stored one (a late, abandoned attempt) does
	// not hide the newer outcome.
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "waiting_approval", "", at.Add(time.Hour))
	if got := mustEpisode(t, l, "weekly", ep.ID); got.Outcome != "needs_attention" || got.OutcomeReason != "OperatorHold" {
		t.Fatalf("a stale report overwrote the outcome: %+v", got)
	}

	// A new outcome without a reason replaces both, with the stage's
	// reason: every outcome has one.
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "waiting_approval", "", at.Add(3*time.Hour))
	if got := mustEpisode(t, l, "weekly", ep.ID); got.Outcome != "waiting_approval" || got.OutcomeReason != allot.ReasonAwaitingApproval {
		t.Fatalf("after waiting_approval: %+v", got)
	}
	mustEpisodeOutcome(t, l, "weekly", ep.ID, "completed", "", at.Add(4*time.Hour))
	done, err := l.CompleteEpisode(ctxT(t), "weekly", ep.ID, at.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if done.Outcome != "completed" || done.OutcomeReason != allot.ReasonStepsCompleted || done.Status != EpisodeCompleted {
		t.Fatalf("CompleteEpisode = %+v, want it to carry the outcome", done)
	}
	if got := outcomeAt(t, l, "weekly", ep.ID); !got.Equal(at.Add(4 * time.Hour)) {
		t.Fatalf("outcome time %v after completion", got)
	}

	// Another episode is untouched; a zero time means now.
	other := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	if got := mustEpisode(t, l, "weekly", other.ID); got != other {
		t.Fatalf("the other episode changed: %+v", got)
	}
	before := now()
	mustEpisodeOutcome(t, l, "weekly", other.ID, "failed", "VendorRejected", time.Time{})
	if got := outcomeAt(t, l, "weekly", other.ID); got.Before(before) || got.After(now()) {
		t.Fatalf("a zero time stored %v, want about now (%v)", got, before)
	}
	if got := mustEpisode(t, l, "weekly", ep.ID); got.Outcome != "completed" {
		t.Fatalf("reporting on %s changed %s: %+v", other.ID, ep.ID, got)
	}
}

func testEpisodeOutcomeInvalid(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	ctx := ctxT(t)
	wantErr(t, "missing episode", l.RecordEpisodeOutcome(ctx, "weekly", "2026-W32-9", "completed", "", t0),
		ErrEpisodeNotFound, `"weekly"`, "2026-W32-9")
	// The same ID in another pipeline is another episode.
	wantErr(t, "other pipeline", l.RecordEpisodeOutcome(ctx, "daily", ep.ID, "completed", "", t0),
		ErrEpisodeNotFound, `"daily"`, ep.ID)
	wantErr(t, "no episode ID", l.RecordEpisodeOutcome(ctx, "weekly", "", "completed", "", t0), ErrEpisodeNotFound)
	wantErr(t, "no pipeline", l.RecordEpisodeOutcome(ctx, "", ep.ID, "completed", "", t0), ErrInvalidInput)
	wantErr(t, "no outcome", l.RecordEpisodeOutcome(ctx, "weekly", ep.ID, "", "OutcomeUnknown", t0), ErrInvalidInput, ep.ID)
	if got := mustEpisode(t, l, "weekly", ep.ID); got != ep {
		t.Fatalf("refused reports wrote: %+v, want %+v", got, ep)
	}
	if n := countRows(t, l, "episodes"); n != 1 {
		t.Fatalf("%d episodes, want 1", n)
	}
}

func testRunOutcomeCounts(t *testing.T, l *Ledger) {
	base := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	record := func(pipeline, key, run string, outcome allot.Outcome, reason string, at time.Time) {
		t.Helper()
		if _, err := l.RecordRunOutcome(ctxT(t), RunOutcome{Pipeline: pipeline, AllocationKey: key, RunID: run,
			Outcome: outcome, Reason: reason, Sequence: -1, RecordedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(pipeline string, since time.Time) ([]OutcomeCount, error) {
		return l.RunOutcomeCounts(ctxT(t), pipeline, since)
	}
	if got, err := count("", time.Time{}); err != nil || len(got) != 0 {
		t.Fatalf("RunOutcomeCounts on an empty ledger = %v, %v", got, err)
	}

	record("alpha", "k1", "r1", "allocated", ReasonNewEpisode, base)
	record("alpha", "k1", "r2", "reused", ReasonKeyBound, base.Add(time.Hour))
	record("alpha", "k2", "r1", "skipped", ReasonCapReached, base.Add(2*time.Hour))
	record("alpha", "k3", "r1", "skipped", ReasonCapReached, base.Add(3*time.Hour))
	// A retried run is rewritten, not added: it counts once, as it ended.
	record("alpha", "k4", "r1", "failed", "LedgerUnavailable", base.Add(3*time.Hour))
	record("alpha", "k4", "r1", "allocated", ReasonNewEpisode, base.Add(4*time.Hour))
	record("alpha", "k5", "r1", "skipped", "nothing_ready", base.Add(5*time.Hour))
	record("beta", "b1", "r1", "allocated", ReasonNewEpisode, base)
	record("beta", "b2", "r1", "failed", "KeyCrossesPeriod", base.Add(6*time.Hour))
	// The same key and run ID in another pipeline is another run.
	record("beta", "k1", "r1", "allocated", ReasonNewEpisode, base.Add(6*time.Hour))

	got, err := count("alpha", time.Time{})
	wantCounts(t, "alpha, ever", got, err,
		oc("allocated", ReasonNewEpisode, 2), oc("reused", ReasonKeyBound, 1),
		oc("skipped", ReasonCapReached, 2), oc("skipped", "nothing_ready", 1))
	// since is inclusive: k2's outcome was recorded exactly then.
	got, err = count("alpha", base.Add(2*time.Hour))
	wantCounts(t, "alpha since +2h", got, err,
		oc("allocated", ReasonNewEpisode, 1), oc("skipped", ReasonCapReached, 2), oc("skipped", "nothing_ready", 1))
	got, err = count("alpha", base.Add(2*time.Hour+time.Microsecond))
	wantCounts(t, "alpha after +2h", got, err,
		oc("allocated", ReasonNewEpisode, 1), oc("skipped", ReasonCapReached, 1), oc("skipped", "nothing_ready", 1))
	got, err = count("beta", time.Time{})
	wantCounts(t, "beta, ever", got, err, oc("allocated", ReasonNewEpisode, 2), oc("failed", "KeyCrossesPeriod", 1))
	got, err = count("", time.Time{})
	wantCounts(t, "all, ever", got, err,
		oc("allocated", ReasonNewEpisode, 4), oc("failed", "KeyCrossesPeriod", 1), oc("reused", ReasonKeyBound, 1),
		oc("skipped", ReasonCapReached, 2), oc("skipped", "nothing_ready", 1))
	// A since in another zone is the same instant.
	got, err = count("", base.Add(5*time.Hour).In(time.FixedZone("UTC+2", 2*3600)))
	wantCounts(t, "all since +5h", got, err,
		oc("allocated", ReasonNewEpisode, 1), oc("failed", "KeyCrossesPeriod", 1), oc("skipped", "nothing_ready", 1))
	for _, p := range []string{"", "alpha"} {
		if got, err := count(p, base.Add(7*time.Hour)); err != nil || len(got) != 0 {
			t.Fatalf("RunOutcomeCounts(%q, after everything) = %v, %v", p, got, err)
		}
	}
	if got, err := count("gamma", time.Time{}); err != nil || len(got) != 0 {
		t.Fatalf("RunOutcomeCounts(unknown pipeline) = %v, %v", got, err)
	}
}

func testEpisodeOutcomeCounts(t *testing.T, l *Ledger) {
	base := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	count := func(pipeline string, since time.Time) ([]OutcomeCount, error) {
		return l.EpisodeOutcomeCounts(ctxT(t), pipeline, since)
	}
	if got, err := count("", time.Time{}); err != nil || len(got) != 0 {
		t.Fatalf("EpisodeOutcomeCounts on an empty ledger = %v, %v", got, err)
	}
	eps := map[string]Episode{}
	for i, created := range []time.Time{base, base, base.Add(day), base.Add(day), base.Add(day)} {
		ep := alloc(t, l, "alpha", fmt.Sprintf("a%d", i), "2026-W32", 0).Episode
		setCreatedAt(t, l, "alpha", ep.ID, created)
		eps[fmt.Sprintf("a%d", i)] = ep
	}
	for i, created := range []time.Time{base, base.Add(day), base.Add(day)} {
		ep := alloc(t, l, "beta", fmt.Sprintf("b%d", i), "2026-08-03", 0).Episode
		setCreatedAt(t, l, "beta", ep.ID, created)
		eps[fmt.Sprintf("b%d", i)] = ep
	}
	at := base.Add(2 * day)
	// a0: completed, never reported; a1: allocated, never reported.
	if _, err := l.CompleteEpisode(ctxT(t), "alpha", eps["a0"].ID, at); err != nil {
		t.Fatal(err)
	}
	mustEpisodeOutcome(t, l, "alpha", eps["a2"].ID, "needs_attention", "OutcomeUnknown", at)
	// a3: reported completed and completed: one line with a0.
	mustEpisodeOutcome(t, l, "alpha", eps["a3"].ID, "completed", "", at)
	if _, err := l.CompleteEpisode(ctxT(t), "alpha", eps["a3"].ID, at); err != nil {
		t.Fatal(err)
	}
	mustEpisodeOutcome(t, l, "alpha", eps["a4"].ID, "failed", "VendorRejected", at)
	// Only the current outcome counts: b1 waited for approval, then was
	// rejected; b2 stays allocated.
	mustEpisodeOutcome(t, l, "beta", eps["b0"].ID, "needs_attention", "OutcomeUnknown", at)
	mustEpisodeOutcome(t, l, "beta", eps["b1"].ID, "waiting_approval", "", at)
	mustEpisodeOutcome(t, l, "beta", eps["b1"].ID, "rejected", "", at.Add(time.Hour))
	// Repeats do not count twice.
	mustEpisodeOutcome(t, l, "beta", eps["b0"].ID, "needs_attention", "OutcomeUnknown", at.Add(time.Hour))

	got, err := count("alpha", time.Time{})
	wantCounts(t, "alpha, ever", got, err,
		oc("allocated", "", 1), oc("completed", "steps_completed", 2), oc("failed", "VendorRejected", 1), oc("needs_attention", "OutcomeUnknown", 1))
	// since filters on created_at, inclusive.
	got, err = count("alpha", base.Add(day))
	wantCounts(t, "alpha since day 1", got, err,
		oc("completed", "steps_completed", 1), oc("failed", "VendorRejected", 1), oc("needs_attention", "OutcomeUnknown", 1))
	got, err = count("beta", time.Time{})
	wantCounts(t, "beta, ever", got, err,
		oc("allocated", "", 1), oc("needs_attention", "OutcomeUnknown", 1), oc("rejected", "approval_rejected", 1))
	got, err = count("", time.Time{})
	wantCounts(t, "all, ever", got, err,
		oc("allocated", "", 2), oc("completed", "steps_completed", 2), oc("failed", "VendorRejected", 1),
		oc("needs_attention", "OutcomeUnknown", 2), oc("rejected", "approval_rejected", 1))
	got, err = count("", base.Add(day))
	wantCounts(t, "all since day 1", got, err,
		oc("allocated", "", 1), oc("completed", "steps_completed", 1), oc("failed", "VendorRejected", 1),
		oc("needs_attention", "OutcomeUnknown", 1), oc("rejected", "approval_rejected", 1))
	if got, err := count("", base.Add(day+time.Microsecond)); err != nil || len(got) != 0 {
		t.Fatalf("EpisodeOutcomeCounts(after every creation) = %v, %v", got, err)
	}
	if got, err := count("gamma", time.Time{}); err != nil || len(got) != 0 {
		t.Fatalf("EpisodeOutcomeCounts(unknown pipeline) = %v, %v", got, err)
	}
}

func testEpisodesNeedingAttention(t *testing.T, l *Ledger) {
	want := func(what string, exp map[string]int) {
		t.Helper()
		got, err := l.EpisodesNeedingAttention(ctxT(t))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got == nil || len(got) != len(exp) {
			t.Fatalf("%s: EpisodesNeedingAttention = %v, want %v", what, got, exp)
		}
		for p, n := range exp {
			if got[p] != n {
				t.Fatalf("%s: EpisodesNeedingAttention = %v, want %v", what, got, exp)
			}
		}
	}
	want("empty ledger", map[string]int{})
	ep := func(pipeline, key string) string {
		return alloc(t, l, pipeline, key, "2026-W32", 0).Episode.ID
	}
	a0, a1, a2 := ep("alpha", "a0"), ep("alpha", "a1"), ep("alpha", "a2")
	b0 := ep("beta", "b0")
	g0 := ep("gamma", "g0")
	ep("delta", "d0") // no outcome at all
	want("no outcomes yet", map[string]int{})
	at := t0.Add(time.Hour)
	mustEpisodeOutcome(t, l, "alpha", a0, "needs_attention", "OutcomeUnknown", at)
	mustEpisodeOutcome(t, l, "alpha", a1, "needs_attention", "OperatorHold", at)
	mustEpisodeOutcome(t, l, "alpha", a2, "waiting_approval", "", at)
	mustEpisodeOutcome(t, l, "beta", b0, "needs_attention", "OutcomeUnknown", at)
	mustEpisodeOutcome(t, l, "gamma", g0, "failed", "needs_attention", at) // a reason, not the outcome
	want("parked", map[string]int{"alpha": 2, "beta": 1})
	// Repeats change nothing.
	mustEpisodeOutcome(t, l, "alpha", a0, "needs_attention", "OutcomeUnknown", at.Add(time.Minute))
	want("repeated", map[string]int{"alpha": 2, "beta": 1})
	// Resolving an episode takes it off the gauge; a pipeline with none left
	// is absent.
	mustEpisodeOutcome(t, l, "alpha", a0, "completed", "", at.Add(time.Hour))
	mustEpisodeOutcome(t, l, "beta", b0, "failed", "Abandoned", at.Add(time.Hour))
	want("resolved", map[string]int{"alpha": 1})
}

// testOutcomeQueriesUseIndexes checks the plans of the counting queries:
// each filtered one must seek a range of the index made for it, so that its
// cost follows the rows it counts, not the ledger's history. The planner is
// told to prefer indexes (PostgreSQL's would scan a test's tiny tables), so
// a missing index shows as a table scan.
func testOutcomeQueriesUseIndexes(t *testing.T, l *Ledger) {
	since := t0
	for _, tc := range []struct {
		name  string
		query func() (string, []any)
		index string
	}{
		{"EpisodesNeedingAttention", l.needingAttentionQuery, "episodes_outcome_pipeline"},
		{"RunOutcomeCounts(pipeline, since)", func() (string, []any) { return l.runOutcomeCountsQuery("alpha", since) }, "run_outcomes_pipeline_recorded"},
		{"RunOutcomeCounts(all, since)", func() (string, []any) { return l.runOutcomeCountsQuery("", since) }, "run_outcomes_recorded"},
		{"EpisodeOutcomeCounts(pipeline, since)", func() (string, []any) { return l.episodeOutcomeCountsQuery("alpha", since) }, "episodes_pipeline_created"},
	} {
		query, args := tc.query()
		plan := queryPlan(t, l, query, args...)
		// SQLite says "SEARCH <table> USING [COVERING] INDEX <name> (...)";
		// PostgreSQL "Index [Only] Scan using <name> ... Index Cond: ..." or
		// a bitmap scan of the index with its Index Cond.
		seeks := strings.Contains(plan, "SEARCH") || strings.Contains(plan, "Index Cond")
		if !strings.Contains(plan, tc.index) || !seeks || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s does not seek index %s:\n%s\nplan:\n%s", tc.name, tc.index, query, plan)
		}
	}
}

// queryPlan returns the database's plan for a query, one line per row.
func queryPlan(t *testing.T, l *Ledger, query string, args ...any) string {
	t.Helper()
	ctx := ctxT(t)
	tx, err := l.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if l.d.preferIndexes != "" {
		if _, err := tx.ExecContext(ctx, l.d.preferIndexes); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.QueryContext(ctx, l.d.explain+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		var text string
		for i := range vals {
			vals[i] = new(any)
		}
		vals[len(vals)-1] = &text
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, text)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// testMigrateV2ToV3 builds a ledger as the v2 build left it, with episodes,
// steps, paid work, costs, decisions and run outcomes, and checks that
// migrating it keeps all of that and starts every episode without an
// outcome.
func testMigrateV2ToV3(t *testing.T, url string) {
	ctx := ctxT(t)
	v2 := ledgerAtVersion(t, url, 2)
	// Raw SQL for episodes: this build's Allocate and CompleteEpisode read
	// the outcome columns, which v2 lacks.
	rawInsertEpisode(t, v2, "weekly", "2026-W32-0", "2026-W32", 0, "k0")
	rawInsertEpisode(t, v2, "weekly", "2026-W32-1", "2026-W32", 1, "k1")
	rawInsertEpisode(t, v2, "daily", "2026-08-03-0", "2026-08-03", 0, "d0")
	done := t0.Add(time.Hour)
	rawExec(t, v2, `UPDATE episodes SET status = 'completed', completed_at = ? WHERE pipeline = 'weekly' AND episode_id = '2026-W32-1'`,
		v2.d.timeArg(done))
	want := []Episode{
		{Pipeline: "weekly", ID: "2026-W32-0", Period: "2026-W32", Sequence: 0, AllocationKey: "k0", NominalTime: t0, CreatedAt: t0, Status: EpisodeAllocated},
		{Pipeline: "weekly", ID: "2026-W32-1", Period: "2026-W32", Sequence: 1, AllocationKey: "k1", NominalTime: t0, CreatedAt: t0,
			Status: EpisodeCompleted, CompletedAt: done},
		{Pipeline: "daily", ID: "2026-08-03-0", Period: "2026-08-03", Sequence: 0, AllocationKey: "d0", NominalTime: t0, CreatedAt: t0, Status: EpisodeAllocated},
	}
	rawInsertStep(t, v2, "weekly", want[0].ID, "plan", "completed") // RecordStep writes v5 columns
	// Raw SQL for paid work and decisions too: this build's paid-task and
	// decision calls read the v4 columns (owner, maybe_sent, ...).
	r := paidRef(want[0], "render", 0)
	rawInsertPaidTask(t, v2, r, testKey(r), "succeeded", "vr-1")
	rawInsertCost(t, v2, "vr-1", r, 10)
	parked := paidRef(want[2], "voice", 0)
	rawInsertPaidTask(t, v2, parked, testKey(parked), "intent", "") // outcome unknown, left for the operator
	rawExec(t, v2, `INSERT INTO operator_decisions (request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_at)
		VALUES ('u-1', 'weekly', ?, '', 0, ?, '', 'looks good', ?)`, want[1].ID, string(allot.ActionApprove), v2.d.timeArg(done))
	runs := []RunOutcome{
		{Pipeline: "weekly", AllocationKey: "k0", RunID: "r", Outcome: "allocated", Reason: ReasonNewEpisode, EpisodeID: want[0].ID, Period: "2026-W32", Sequence: 0, RecordedAt: t0},
		{Pipeline: "weekly", AllocationKey: "k0", RunID: "r2", Outcome: "reused", Reason: ReasonKeyBound, EpisodeID: want[0].ID, Period: "2026-W32", Sequence: 0, RecordedAt: t0.Add(time.Minute)},
		{Pipeline: "daily", AllocationKey: "x", RunID: "r", Outcome: "skipped", Reason: ReasonCapReached, Sequence: -1, RecordedAt: t0},
	}
	for _, o := range runs {
		if _, err := v2.RecordRunOutcome(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v2.w.ExecContext(ctx, `SELECT outcome FROM episodes`); err == nil {
		t.Fatal("a v2 ledger already has episodes.outcome")
	}
	if err := v2.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctx, url)
	if err == nil {
		_ = ro.Close()
		t.Fatal("OpenReadOnly accepted a v2 ledger")
	}
	if !strings.Contains(err.Error(), "schema version 2") {
		t.Errorf("OpenReadOnly(v2) = %v, want it to name the old version", err)
	}

	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	for _, w := range want {
		if got := mustEpisode(t, l, w.Pipeline, w.ID); got != w {
			t.Fatalf("episode after migration = %+v, want %+v", got, w)
		}
		if at := outcomeAt(t, l, w.Pipeline, w.ID); !at.IsZero() {
			t.Fatalf("episode %s has outcome time %v after migration", w.ID, at)
		}
	}
	if steps, err := l.Steps(ctx, "weekly", want[0].ID); err != nil || len(steps) != 1 || steps[0].Step != "plan" {
		t.Fatalf("steps after migration = %+v, %v", steps, err)
	}
	if pt := mustPaidTask(t, l, r); pt.State != "succeeded" || pt.RemoteRef != "vr-1" {
		t.Fatalf("paid task after migration: %+v", pt)
	}
	if pt := mustPaidTask(t, l, parked); pt.State != "intent" || pt.IdempotencyKey != testKey(parked) || !pt.OutcomeUnknown() {
		t.Fatalf("parked paid task after migration: %+v", pt)
	}
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].RemoteRef != "vr-1" || cs[0].Amount != 10 {
		t.Fatalf("costs after migration: %+v", cs)
	}
	if ds, err := l.Decisions(ctx, "weekly", want[1].ID); err != nil || len(ds) != 1 || ds[0].RequestID != "u-1" || ds[0].Reason != "looks good" {
		t.Fatalf("decisions after migration = %+v, %v", ds, err)
	}
	if got, err := l.RunOutcomes(ctx, "", time.Time{}); err != nil || len(got) != len(runs) {
		t.Fatalf("run outcomes after migration = %+v, %v", got, err)
	}
	got, err := l.RunOutcomeCounts(ctx, "", time.Time{})
	wantCounts(t, "run outcome counts after migration", got, err,
		oc("allocated", ReasonNewEpisode, 1), oc("reused", ReasonKeyBound, 1), oc("skipped", ReasonCapReached, 1))
	got, err = l.EpisodeOutcomeCounts(ctx, "", time.Time{})
	wantCounts(t, "episode outcome counts after migration", got, err, oc("allocated", "", 2), oc("completed", "steps_completed", 1))
	if m, err := l.EpisodesNeedingAttention(ctx); err != nil || len(m) != 0 {
		t.Fatalf("EpisodesNeedingAttention after migration = %v, %v", m, err)
	}
	// Old episodes take outcomes like new ones.
	mustEpisodeOutcome(t, l, "daily", want[2].ID, "needs_attention", "OutcomeUnknown", t0.Add(2*time.Hour))
	if m, err := l.EpisodesNeedingAttention(ctx); err != nil || len(m) != 1 || m["daily"] != 1 {
		t.Fatalf("EpisodesNeedingAttention = %v, %v; want daily: 1", m, err)
	}
	if r := alloc(t, l, "weekly", "k2", "2026-W32", 0); r.Decision != DecisionAllocated || r.Episode.ID != "2026-W32-2" {
		t.Fatalf("allocation after migration: %+v", r)
	}
	mustCheckClean(t, l, "")
	// Opening again applies nothing more.
	mustBeAtLatestVersion(t, openURLT(t, url))
}

// Both dialects must have the same numbered migrations, so that "version N"
// means the same schema on either.
func TestMigrationsMatchAcrossDialects(t *testing.T) {
	names := func(d *dialect) []string {
		ms, err := loadMigrations(d.migrations)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.name)
		}
		return out
	}
	s, p := names(sqliteDialect), names(postgresDialect)
	if !slices.Equal(s, p) {
		t.Fatalf("sqlite migrations %v, postgres migrations %v", s, p)
	}
	if len(s) < 4 || s[2] != "0003_episode_outcomes.sql" || s[3] != "0004_paid_state_machine.sql" {
		t.Fatalf("migrations %v, want 0003_episode_outcomes.sql third and 0004_paid_state_machine.sql fourth", s)
	}
}

// EpisodesWaitingOnPausedVendor counts per pipeline the episodes waiting
// because a vendor is paused; other waits (a busy or tripped vendor) and
// other outcomes with that reason are not counted, and an episode that
// goes on leaves the count.
func testEpisodesWaitingOnPausedVendor(t *testing.T, l *Ledger) {
	count := func() map[string]int {
		t.Helper()
		got, err := l.EpisodesWaitingOnPausedVendor(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := count(); len(got) != 0 {
		t.Fatalf("an empty ledger counts %v", got)
	}
	ep := func(pipeline, key string) string {
		return alloc(t, l, pipeline, key, "2026-W32", 0).Episode.ID
	}
	a0, a1, a2, b0 := ep("alpha", "a0"), ep("alpha", "a1"), ep("alpha", "a2"), ep("beta", "b0")
	at := t0.Add(time.Hour)
	mustEpisodeOutcome(t, l, "alpha", a0, "waiting_vendor", allot.ReasonVendorPaused, at)
	mustEpisodeOutcome(t, l, "alpha", a1, "waiting_vendor", allot.ReasonVendorPaused, at)
	mustEpisodeOutcome(t, l, "alpha", a2, "waiting_vendor", allot.ReasonVendorBusy, at)
	mustEpisodeOutcome(t, l, "beta", b0, "needs_attention", allot.ReasonVendorPaused, at)
	if got := count(); len(got) != 1 || got["alpha"] != 2 {
		t.Fatalf("EpisodesWaitingOnPausedVendor = %v, want alpha: 2", got)
	}
	mustEpisodeOutcome(t, l, "alpha", a0, "running", "", at.Add(time.Minute))
	if got := count(); len(got) != 1 || got["alpha"] != 1 {
		t.Fatalf("after one went on: %v, want alpha: 1", got)
	}
}
