package e2e

import (
	"testing"
	"time"

	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/pipelinetest"
)

// A change of schedule moves the budget's hold for its scheduled runs at
// once, on a real server (issue 41 §2): created paused, the budget holds
// nothing; unpaused, it holds every hourly run still due this month at
// what one run reserves; paused again, it releases it all.
func TestScheduleChangesMoveTheBudgetsHoldAtOnce(t *testing.T) {
	if now := time.Now().UTC(); time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(now) < 2*time.Hour {
		t.Skip("the month ends within two hours: too few hourly runs are left to hold for")
	}
	toml := pipelinetest.Budgeted{Pipeline: "evals", Budget: "evals-monthly", Period: "month", Limit: 1_000_000,
		HoldScheduled: true, Cron: "0 * * * *"}.TOML()
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	s := c.Schedules()
	s.HoldLedger = c.Ledger
	ctx := c.Ctx()
	held := func(what string, res operator.ScheduleResult, err error) ledger.BudgetPeriod {
		t.Helper()
		if err != nil || res.HoldError != "" || len(res.Holds) != 1 || res.Holds[0].Budget != "evals-monthly" {
			t.Fatalf("%s: holds %+v (%q), %v; want evals-monthly's", what, res.Holds, res.HoldError, err)
		}
		return res.Holds[0]
	}
	res, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "evals", Paused: true})
	if h := held("created paused", res, err); h.HeldRuns != 0 || h.HeldForSchedule != 0 || h.Free != 1_000_000 {
		t.Fatalf("created paused, the budget holds %d for %d runs, %d free; want nothing held", h.HeldForSchedule, h.HeldRuns, h.Free)
	}
	res, err = s.Unpause(ctx, "evals", operator.ScheduleNote{Text: "hold test"})
	h := held("unpaused", res, err)
	if h.HeldRuns < 1 || h.HeldForSchedule != int64(h.HeldRuns)*250 || h.Free != 1_000_000-h.HeldForSchedule {
		t.Fatalf("unpaused, the budget holds %d for %d runs, %d free; want 250 for each hourly run left this month", h.HeldForSchedule, h.HeldRuns, h.Free)
	}
	res, err = s.Pause(ctx, "evals", operator.ScheduleNote{Text: "hold test"})
	if h := held("paused", res, err); h.HeldRuns != 0 || h.HeldForSchedule != 0 || h.Free != 1_000_000 {
		t.Fatalf("paused, the budget holds %d for %d runs; want its hold released", h.HeldForSchedule, h.HeldRuns)
	}
}
