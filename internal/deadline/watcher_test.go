package deadline

import (
	"context"
	"testing"
	"time"

	"allot"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

func watcherOf(t *testing.T, deadline string, now *time.Time) *Watcher {
	t.Helper()
	set, err := pipeline.Parse([]byte("[[pipeline]]\nname = \"weekly\"\ndeadline = \""+deadline+"\"\nwarn_before = \"2h\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return &Watcher{Ledger: ledgertest.New(t).Led, Pipelines: set, Now: func() time.Time { return *now }}
}

func mustPlan(t *testing.T, w *Watcher, after time.Time) PlanResult {
	t.Helper()
	res, err := w.Plan(context.Background(), PlanInput{Pipeline: "weekly", After: after})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A deadline is judged from its declaration on: a period due before it is
// not judged retroactively, nor its warning time if that passed; a
// changed deadline applies from the next deadline on; a period judged is
// not planned again; a pipeline without a deadline plans nothing.
func TestPlanStartsFromTheDeclaration(t *testing.T) {
	// Thursday 2026-08-06 12:00 UTC: the W32 deadline (Friday 09:00) is
	// still to come, its warning (07:00) too.
	now := time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC)
	w := watcherOf(t, "4d9h", &now)
	due := time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)
	if got := mustPlan(t, w, time.Time{}); !got.Declared || got.Period != "2026-W32" || !got.DueAt.Equal(due) || !got.WarnAt.Equal(due.Add(-2*time.Hour)) {
		t.Fatalf("plan on Thursday = %+v; want W32 due %s, warned 2h before", got, due)
	}
	// Declared on Friday 08:00: W32 is still due, its warning has passed.
	now = time.Date(2026, 8, 7, 8, 0, 0, 0, time.UTC)
	w = watcherOf(t, "4d9h", &now)
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W32" || !got.WarnAt.IsZero() {
		t.Fatalf("plan on Friday 08:00 = %+v; want W32 with no warning (its time passed before the declaration)", got)
	}
	// Declared on Friday 10:00: W32 is not judged; W33 is the first.
	now = time.Date(2026, 8, 7, 10, 0, 0, 0, time.UTC)
	w = watcherOf(t, "4d9h", &now)
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W33" {
		t.Fatalf("plan on Friday 10:00 = %+v; want W33: W32 was due before the deadline was declared", got)
	}
	// A changed deadline, declared on Monday of W33 at 10:00, applies
	// from the next deadline on: W33 under the new offset.
	ctx := context.Background()
	if _, err := w.Ledger.DeclareDeadline(ctx, "weekly", "deadline=0d9h0m0s", time.Date(2026, 8, 10, 10, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.Parse([]byte("[[pipeline]]\nname = \"weekly\"\ndeadline = \"0d9h\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Pipelines = set
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W34" || !got.DueAt.Equal(time.Date(2026, 8, 17, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("plan after the change = %+v; want W34 Monday 09:00 (W33's Monday 09:00 was before the change)", got)
	}
	// A judged period is not planned again, whatever After says.
	now = time.Date(2026, 8, 17, 9, 0, 1, 0, time.UTC)
	if _, err := w.Judge(ctx, JudgeInput{Pipeline: "weekly", Period: "2026-W34", Kind: allot.DeadlineLate, DueAt: time.Date(2026, 8, 17, 9, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W35" {
		t.Fatalf("plan after W34 was judged = %+v; want W35", got)
	}
	// No deadline any more: nothing to watch, and nothing judged.
	set, err = pipeline.Parse([]byte("[[pipeline]]\nname = \"weekly\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	w.Pipelines = set
	if got := mustPlan(t, w, time.Time{}); got.Declared {
		t.Fatalf("plan without a deadline = %+v", got)
	}
	if res, err := w.Judge(ctx, JudgeInput{Pipeline: "weekly", Period: "2026-W35", Kind: allot.DeadlineLate, DueAt: now}); err != nil || res.Found {
		t.Fatalf("judge without a deadline = %+v, %v", res, err)
	}
}

// Judge gathers the facts through its sources and records the cause once:
// a second watcher's judgement returns the first record.
func TestJudgeRecordsTheCauseOnce(t *testing.T) {
	now := time.Date(2026, 8, 7, 9, 0, 1, 0, time.UTC)
	w := watcherOf(t, "4d9h", &now)
	asked := 0
	w.Sources.Schedule = func(context.Context, string) (Schedule, error) {
		asked++
		return Schedule{Exists: true, Paused: true, Note: "holiday"}, nil
	}
	in := JudgeInput{Pipeline: "weekly", Period: "2026-W32", Kind: allot.DeadlineLate, DueAt: time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)}
	first, err := w.Judge(context.Background(), in)
	if err != nil || !first.Recorded || first.Record.Cause != allot.CauseSchedulePaused || first.Record.Detail != "the pipeline's Schedule is paused: holiday" {
		t.Fatalf("first judgement = %+v, %v", first, err)
	}
	again, err := w.Judge(context.Background(), in)
	if err != nil || again.Recorded || again.Record.ID != first.Record.ID {
		t.Fatalf("second judgement = %+v, %v; want the first record", again, err)
	}
	if asked != 2 {
		t.Fatalf("the schedule was described %d times; want once per judgement of a short period", asked)
	}
}

// A deadline withdrawn (the file lost it) and declared again later judges
// no period due while there was none: the new declaration is a change.
func TestPlanAfterAWithdrawalStartsAgain(t *testing.T) {
	now := time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC)
	w := watcherOf(t, "4d9h", &now)
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W32" {
		t.Fatalf("first plan = %+v", got)
	}
	if _, err := w.Ledger.WithdrawDeadline(context.Background(), "weekly", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Three weeks later the same deadline is back: W33 and W34 were due
	// while there was none.
	now = time.Date(2026, 8, 26, 12, 0, 0, 0, time.UTC)
	if got := mustPlan(t, w, time.Time{}); got.Period != "2026-W35" {
		t.Fatalf("plan after the deadline came back = %+v; want W35, the first due after it did", got)
	}
}
