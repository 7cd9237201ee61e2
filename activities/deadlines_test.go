package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/deadline"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

func deadlineActivities(t *testing.T, sources deadline.Sources) *Activities {
	t.Helper()
	set, err := pipeline.Parse([]byte(`
[[pipeline]]
name = "weekly"
period = "iso-week"
time_zone = "UTC"
deadline = "4d9h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	led := ledgertest.New(t).Led
	return &Activities{Ledger: led, Pipelines: set, Deadlines: &deadline.Watcher{Ledger: led, Pipelines: set, Sources: sources}}
}

func wantDeadlineErr(t *testing.T, what string, err error, retryable bool, errType string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case retryable && errors.As(err, &appErr) && appErr.NonRetryable():
		t.Errorf("%s: %v is not retried, want it retried", what, err)
	case !retryable && (!errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != errType):
		t.Errorf("%s: %v, want a non-retryable %s", what, err, errType)
	}
}

// A wrong start is refused at once; Temporal's trouble is retried, so the
// judgement is eventually written.
func TestDeadlineActivitiesRefuseWrongInputAndRetryTrouble(t *testing.T) {
	ctx := context.Background()
	due := time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)
	ok := deadline.JudgeInput{Pipeline: "weekly", Period: "2026-W32", Kind: allot.DeadlineLate, DueAt: due}

	var none Activities
	_, err := none.PlanDeadline(ctx, deadline.PlanInput{Pipeline: "weekly"})
	wantDeadlineErr(t, "plan without a watcher", err, false, allot.InvalidInput)
	_, err = none.JudgeDeadline(ctx, ok)
	wantDeadlineErr(t, "judge without a watcher", err, false, allot.InvalidInput)

	a := deadlineActivities(t, deadline.Sources{Schedule: func(context.Context, string) (deadline.Schedule, error) {
		return deadline.Schedule{}, errors.New("connection refused")
	}})
	_, err = a.PlanDeadline(ctx, deadline.PlanInput{Pipeline: "Weekly!"})
	wantDeadlineErr(t, "a bad pipeline name", err, false, allot.InvalidPipelineName)
	_, err = a.PlanDeadline(ctx, deadline.PlanInput{Pipeline: "weekly", LedgerID: "another-ledger"})
	wantDeadlineErr(t, "a plan of another ledger", err, false, allot.LedgerMismatch)
	wrongLedger := ok
	wrongLedger.LedgerID = "another-ledger"
	_, err = a.JudgeDeadline(ctx, wrongLedger)
	wantDeadlineErr(t, "a judgement of another ledger", err, false, allot.LedgerMismatch)
	for name, in := range map[string]deadline.JudgeInput{
		"kind on_time":   {Pipeline: "weekly", Period: "2026-W32", Kind: allot.DeadlineOnTime, DueAt: due},
		"a day's period": {Pipeline: "weekly", Period: "2026-08-04", Kind: allot.DeadlineLate, DueAt: due},
		"no deadline":    {Pipeline: "weekly", Period: "2026-W32", Kind: allot.DeadlineLate},
	} {
		_, err := a.JudgeDeadline(ctx, in)
		wantDeadlineErr(t, name, err, false, allot.InvalidInput)
	}
	_, err = a.JudgeDeadline(ctx, ok)
	wantDeadlineErr(t, "Temporal does not answer", err, true, "")
	if recs, _ := a.Ledger.LateOpen(ctx); len(recs) != 0 {
		t.Errorf("records %+v written without the facts", recs)
	}

	// Answered, the period is judged and recorded once.
	a = deadlineActivities(t, deadline.Sources{})
	if _, err := a.PlanDeadline(ctx, deadline.PlanInput{Pipeline: "weekly", After: due.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	first, err := a.JudgeDeadline(ctx, ok)
	if err != nil || !first.Recorded || first.Record.Kind != allot.DeadlineLate || first.Record.Cause != allot.CauseNoRun {
		t.Fatalf("judged %+v, %v; want a late no_run record", first, err)
	}
	again, err := a.JudgeDeadline(ctx, ok)
	if err != nil || again.Recorded || again.Record.ID != first.Record.ID {
		t.Fatalf("judged again %+v, %v; want the first record, not recorded again", again, err)
	}
}
