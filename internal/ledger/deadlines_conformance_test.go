package ledger

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
)

// Conformance tests for period deadlines (deadlines.go); registered in
// runConformance so that both drivers run them.

// due is the deadline of 2026-W32 in these tests: Friday 09:00 UTC.
var due = time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)

func judgement(kind allot.DeadlineKind, needed int) PeriodJudgement {
	return PeriodJudgement{Pipeline: "weekly", Period: "2026-W32", Kind: kind, DueAt: due, Needed: needed,
		Cause: allot.CauseSchedulePaused, Detail: "the pipeline's Schedule is paused: holiday", Command: allot.ScheduleUnpauseCommand("weekly"),
		At: due.Add(time.Second)}
}

func mustJudge(t *testing.T, l *Ledger, j PeriodJudgement) (DeadlineRecord, bool, bool) {
	t.Helper()
	rec, recorded, found, err := l.JudgePeriod(ctxT(t), j)
	if err != nil {
		t.Fatalf("JudgePeriod(%+v): %v", j, err)
	}
	return rec, recorded, found
}

func kindsOf(t *testing.T, l *Ledger, pipeline string) string {
	t.Helper()
	recs, err := l.DeadlineRecords(ctxT(t), DeadlineFilter{Pipeline: pipeline})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Period+":"+string(r.Kind))
	}
	return strings.Join(out, " ")
}

func completeEpisode(t *testing.T, l *Ledger, pipeline, key, period string, at time.Time) {
	t.Helper()
	res := alloc(t, l, pipeline, key, period, 0)
	if _, err := l.CompleteEpisode(ctxT(t), pipeline, res.Episode.ID, at); err != nil {
		t.Fatal(err)
	}
}

// testDeadlineDeclare: the first declaration is kept; the same spec
// changes nothing; another spec moves changed_at only.
func testDeadlineDeclare(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if _, found, err := l.DeadlineDeclaration(ctx, "weekly"); err != nil || found {
		t.Fatalf("declaration before any = %v, %v", found, err)
	}
	first, err := l.DeclareDeadline(ctx, "weekly", "deadline=4d9h0m0s", t0)
	if err != nil || !first.DeclaredAt.Equal(t0) || !first.ChangedAt.Equal(t0) || first.Spec != "deadline=4d9h0m0s" {
		t.Fatalf("first declaration = %+v, %v", first, err)
	}
	again, err := l.DeclareDeadline(ctx, "weekly", "deadline=4d9h0m0s", t0.Add(time.Hour))
	if err != nil || again != first {
		t.Fatalf("the same spec again = %+v, %v; want %+v unchanged", again, err, first)
	}
	changed, err := l.DeclareDeadline(ctx, "weekly", "deadline=4d12h0m0s", t0.Add(2*time.Hour))
	if err != nil || !changed.DeclaredAt.Equal(t0) || !changed.ChangedAt.Equal(t0.Add(2*time.Hour)) || changed.Spec != "deadline=4d12h0m0s" {
		t.Fatalf("another spec = %+v, %v; want declared at %s, changed 2h later", changed, err, t0)
	}
	if got, found, err := l.DeadlineDeclaration(ctx, "weekly"); err != nil || !found || got != changed {
		t.Fatalf("DeadlineDeclaration = %+v, %v, %v; want %+v", got, found, err, changed)
	}
	// Withdrawn (the file has no deadline any more), then declared again
	// with the same spec: a change, so the periods due meanwhile are not
	// judged.
	if w, err := l.WithdrawDeadline(ctx, "weekly", t0.Add(3*time.Hour)); err != nil || !w {
		t.Fatalf("WithdrawDeadline = %v, %v", w, err)
	}
	if w, err := l.WithdrawDeadline(ctx, "weekly", t0.Add(4*time.Hour)); err != nil || w {
		t.Fatalf("WithdrawDeadline again = %v, %v; want nothing to do", w, err)
	}
	if w, err := l.WithdrawDeadline(ctx, "never", t0); err != nil || w {
		t.Fatalf("WithdrawDeadline of a pipeline never declared = %v, %v", w, err)
	}
	back, err := l.DeclareDeadline(ctx, "weekly", "deadline=4d12h0m0s", t0.Add(5*time.Hour))
	if err != nil || !back.ChangedAt.Equal(t0.Add(5*time.Hour)) || !back.DeclaredAt.Equal(t0) {
		t.Fatalf("declared again after a withdrawal = %+v, %v; want changed at the new declaration", back, err)
	}
	for _, bad := range [][2]string{{"", "x"}, {"weekly", ""}} {
		if _, err := l.DeclareDeadline(ctx, bad[0], bad[1], t0); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("DeclareDeadline(%q, %q) = %v; want invalid input", bad[0], bad[1], err)
		}
	}
}

// testDeadlineJudgeOnce: a short period is recorded late once with its
// cause, however often it is judged; a warning likewise; a period with its
// episodes is on time and gets no warning.
func testDeadlineJudgeOnce(t *testing.T, l *Ledger) {
	warn := judgement(allot.DeadlineWarning, 1)
	rec, recorded, found := mustJudge(t, l, warn)
	if !recorded || !found || rec.Kind != allot.DeadlineWarning || rec.Cause != allot.CauseSchedulePaused || rec.Completed != 0 || rec.Needed != 1 {
		t.Fatalf("warning = %+v recorded %v found %v", rec, recorded, found)
	}
	late := judgement(allot.DeadlineLate, 1)
	rec, recorded, _ = mustJudge(t, l, late)
	if !recorded || rec.Kind != allot.DeadlineLate || rec.Detail != late.Detail || rec.Command != late.Command || !rec.DueAt.Equal(due) {
		t.Fatalf("late = %+v recorded %v", rec, recorded)
	}
	// Judged again, with another cause: the first record stands.
	late.Cause, late.Detail = allot.CauseNoRun, "another watcher's view"
	again, recorded, _ := mustJudge(t, l, late)
	if recorded || again.ID != rec.ID || again.Cause != allot.CauseSchedulePaused {
		t.Fatalf("judged again = %+v recorded %v; want the first record %d", again, recorded, rec.ID)
	}
	// A period with its episode: on time, and no warning.
	completeEpisode(t, l, "daily", "daily/k1", "2026-W32", t0)
	onTime := judgement(allot.DeadlineLate, 1)
	onTime.Pipeline = "daily"
	rec, recorded, _ = mustJudge(t, l, onTime)
	if !recorded || rec.Kind != allot.DeadlineOnTime || rec.Cause != "" || rec.Detail != "" || rec.Completed != 1 {
		t.Fatalf("a period with its episode = %+v; want on_time with no cause", rec)
	}
	noWarn := judgement(allot.DeadlineWarning, 1)
	noWarn.Pipeline = "daily"
	if _, recorded, found := mustJudge(t, l, noWarn); recorded || found {
		t.Fatal("a warning for a period that is not short")
	}
	if got, want := kindsOf(t, l, "weekly"), "2026-W32:warning 2026-W32:late"; got != want {
		t.Fatalf("weekly records %q, want %q", got, want)
	}
	if got, want := kindsOf(t, l, "daily"), "2026-W32:on_time"; got != want {
		t.Fatalf("daily records %q, want %q", got, want)
	}
	// Needing two, one completed is short.
	two := judgement(allot.DeadlineLate, 2)
	two.Pipeline, two.Period = "daily", "2026-W33"
	completeEpisode(t, l, "daily", "daily/k2", "2026-W33", t0)
	if rec, _, _ := mustJudge(t, l, two); rec.Kind != allot.DeadlineLate || rec.Completed != 1 || rec.Needed != 2 {
		t.Fatalf("one of two completed = %+v; want late, 1 of 2", rec)
	}
}

// testDeadlineCompletedLate: completing the last episode a late period
// needs records when and by how much, once; an on-time period, or one
// still short, records nothing.
func testDeadlineCompletedLate(t *testing.T, l *Ledger) {
	mustJudge(t, l, judgement(allot.DeadlineLate, 2))
	completeEpisode(t, l, "weekly", "weekly/k1", "2026-W32", due.Add(time.Hour))
	if got := kindsOf(t, l, "weekly"); got != "2026-W32:late" {
		t.Fatalf("one of two completed: %q; want still late only", got)
	}
	completeEpisode(t, l, "weekly", "weekly/k2", "2026-W32", due.Add(90*time.Minute))
	recs, err := l.DeadlineRecords(ctxT(t), DeadlineFilter{Pipeline: "weekly", Kind: allot.DeadlineCompletedLate})
	if err != nil || len(recs) != 1 {
		t.Fatalf("completed_late records = %+v, %v; want one", recs, err)
	}
	if r := recs[0]; !r.CompletedAt.Equal(due.Add(90*time.Minute)) || r.LateBy != 90*time.Minute || r.Completed != 2 || !r.DueAt.Equal(due) {
		t.Fatalf("completed_late = %+v; want completed 90m after %s", r, due)
	}
	// A third episode completing adds nothing.
	completeEpisode(t, l, "weekly", "weekly/k3", "2026-W32", due.Add(2*time.Hour))
	if got := kindsOf(t, l, "weekly"); got != "2026-W32:late 2026-W32:completed_late" {
		t.Fatalf("records %q", got)
	}
	if open, err := l.LateOpen(ctxT(t)); err != nil || len(open) != 0 {
		t.Fatalf("LateOpen once completed = %+v, %v", open, err)
	}
	// Completing an episode of a pipeline with no record writes none.
	completeEpisode(t, l, "other", "other/k1", "2026-W32", due.Add(time.Hour))
	if got := kindsOf(t, l, "other"); got != "" {
		t.Fatalf("records of a pipeline never judged: %q", got)
	}
}

// testDeadlineJudgeRacesCompletion: judging a period at its deadline while
// its episode completes ends on time, or late and then completed late:
// never late with the period complete and no completed_late.
func testDeadlineJudgeRacesCompletion(t *testing.T, l *Ledger) {
	for i := range 8 {
		period := fmt.Sprintf("2026-W%02d", 10+i)
		res := alloc(t, l, "weekly", "weekly/race"+period, period, 0)
		j := judgement(allot.DeadlineLate, 1)
		j.Period = period
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _, _, err := l.JudgePeriod(ctxT(t), j)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := l.CompleteEpisode(ctxT(t), "weekly", res.Episode.ID, due.Add(time.Minute))
			errs <- err
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		recs, err := l.DeadlineRecords(ctxT(t), DeadlineFilter{Pipeline: "weekly", Since: due.AddDate(-1, 0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, r := range recs {
			if r.Period == period {
				kinds = append(kinds, string(r.Kind))
			}
		}
		if got := strings.Join(kinds, " "); got != "on_time" && got != "late completed_late" {
			t.Fatalf("%s judged while its episode completed: %q; want on_time, or late then completed_late", period, got)
		}
	}
}

// testDeadlineInvalidJudgement: a judgement that names no period, asks
// another kind, needs nothing or names an unknown cause is refused and
// writes nothing.
func testDeadlineInvalidJudgement(t *testing.T, l *Ledger) {
	for name, mutate := range map[string]func(*PeriodJudgement){
		"no pipeline":   func(j *PeriodJudgement) { j.Pipeline = "" },
		"no period":     func(j *PeriodJudgement) { j.Period = "" },
		"on_time asked": func(j *PeriodJudgement) { j.Kind = allot.DeadlineOnTime },
		"needs nothing": func(j *PeriodJudgement) { j.Needed = 0 },
		"no deadline":   func(j *PeriodJudgement) { j.DueAt = time.Time{} },
		"unknown cause": func(j *PeriodJudgement) { j.Cause = "gremlins" },
	} {
		j := judgement(allot.DeadlineLate, 1)
		mutate(&j)
		if _, _, _, err := l.JudgePeriod(ctxT(t), j); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("%s: JudgePeriod = %v; want invalid input", name, err)
		}
	}
	if n := countRows(t, l, "deadline_records"); n != 0 {
		t.Fatalf("refused judgements wrote %d records", n)
	}
}

// testDeadlineReads: the last judged deadline skips warnings; records page
// by ID and filter by kind and due time; totals count per pipeline and
// kind; LateOpen lists the late periods not completed since, and
// WarningsOpen the warned periods not judged at their deadline yet.
func testDeadlineReads(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if last, err := l.LastJudgedDue(ctx, "weekly"); err != nil || !last.IsZero() {
		t.Fatalf("LastJudgedDue of nothing = %s, %v", last, err)
	}
	for i := range 3 {
		j := judgement(allot.DeadlineLate, 1)
		j.Period, j.DueAt = fmt.Sprintf("2026-W%02d", 32+i), due.AddDate(0, 0, 7*i)
		mustJudge(t, l, j)
	}
	w := judgement(allot.DeadlineWarning, 1)
	w.Period, w.DueAt = "2026-W40", due.AddDate(0, 0, 7*8)
	mustJudge(t, l, w)
	if last, err := l.LastJudgedDue(ctx, "weekly"); err != nil || !last.Equal(due.AddDate(0, 0, 14)) {
		t.Fatalf("LastJudgedDue = %s, %v; want the W34 deadline (a warning is not a judgement at the deadline)", last, err)
	}
	page1, err := l.DeadlineRecords(ctx, DeadlineFilter{Pipeline: "weekly", Limit: 2})
	if err != nil || len(page1) != 2 {
		t.Fatalf("page 1 = %+v, %v", page1, err)
	}
	page2, err := l.DeadlineRecords(ctx, DeadlineFilter{Pipeline: "weekly", AfterID: page1[1].ID, Limit: 2})
	if err != nil || len(page2) != 2 || page2[0].ID <= page1[1].ID {
		t.Fatalf("page 2 = %+v, %v", page2, err)
	}
	if late, err := l.DeadlineRecords(ctx, DeadlineFilter{Pipeline: "weekly", Kind: allot.DeadlineLate, Since: due.AddDate(0, 0, 7)}); err != nil || len(late) != 2 {
		t.Fatalf("late since W33 = %+v, %v; want W33 and W34", late, err)
	}
	if _, err := l.DeadlineRecords(ctx, DeadlineFilter{}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("DeadlineRecords of no pipeline = %v", err)
	}
	// W40's warning is open; W32's, judged late since, is not.
	w32 := judgement(allot.DeadlineWarning, 1)
	w32.Period, w32.DueAt = "2026-W32", due
	mustJudge(t, l, w32)
	if warned, err := l.WarningsOpen(ctx); err != nil || len(warned) != 1 || warned[0].Period != "2026-W40" || warned[0].Kind != allot.DeadlineWarning {
		t.Fatalf("WarningsOpen = %+v, %v; want W40's warning only (W32 was judged late)", warned, err)
	}
	completeEpisode(t, l, "weekly", "weekly/k", "2026-W33", due.AddDate(0, 0, 8))
	open, err := l.LateOpen(ctx)
	if err != nil || len(open) != 2 || open[0].Period != "2026-W32" || open[1].Period != "2026-W34" {
		t.Fatalf("LateOpen = %+v, %v; want W32 and W34 (W33 completed late)", open, err)
	}
	totals, err := l.DeadlineTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[allot.DeadlineKind]int{}
	for _, tot := range totals {
		if tot.Pipeline != "weekly" {
			t.Fatalf("totals of %s", tot.Pipeline)
		}
		got[tot.Kind] = tot.Count
	}
	if got[allot.DeadlineLate] != 3 || got[allot.DeadlineWarning] != 2 || got[allot.DeadlineCompletedLate] != 1 || len(got) != 3 {
		t.Fatalf("totals = %v", got)
	}
}

// testDeadlineQueriesUseIndexes: a period's runs and a pipeline's last
// judged deadline seek their indexes.
func testDeadlineQueriesUseIndexes(t *testing.T, l *Ledger) {
	for _, tc := range []struct {
		name, query, index string
		args               []any
	}{
		{"RunOutcomesOfPeriod", `SELECT run_id FROM run_outcomes WHERE pipeline = ? AND period = ?`, "run_outcomes_by_period", []any{"weekly", "2026-W32"}},
		{"LastJudgedDue", `SELECT due_at FROM deadline_records WHERE pipeline = ? AND kind IN (?, ?) ORDER BY due_at DESC LIMIT 1`, "deadline_records_by_due", []any{"weekly", "late", "on_time"}},
	} {
		plan := queryPlan(t, l, l.d.q(tc.query), tc.args...)
		if !strings.Contains(plan, tc.index) {
			t.Errorf("%s does not use index %s:\nplan:\n%s", tc.name, tc.index, plan)
		}
	}
}
