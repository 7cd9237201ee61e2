package e2e

import (
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/pipelinetest"
)

// holdingCluster is a cluster whose pipeline evals runs hourly under
// budget evals-monthly (10,000.00 USD), which holds for its scheduled runs
// at 2.50 USD each; toml is its pipeline file.
func holdingCluster(t *testing.T) (c *allottest.Cluster, toml string) {
	t.Helper()
	if now := time.Now().UTC(); time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(now) < 2*time.Hour {
		t.Skip("the month ends within two hours: too few hourly runs are left to hold for")
	}
	toml = pipelinetest.Budgeted{Pipeline: "evals", Budget: "evals-monthly", Period: "month", Limit: 1_000_000,
		HoldScheduled: true, Cron: "0 * * * *"}.TOML()
	return allottest.NewClusterWithPipelines(t, []byte(toml)), toml
}

// A change of schedule moves the budget's hold for its scheduled runs at
// once, on a real server (issue 41 §2): created paused, the budget holds
// nothing; unpaused, it holds every hourly run still due this month at
// what one run reserves; paused again, it releases it all.
func TestScheduleChangesMoveTheBudgetsHoldAtOnce(t *testing.T) {
	c, _ := holdingCluster(t)
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

// With real processes on one ledger: a worker process holds for the
// Schedule's runs on its own (its HoldKeeper, on start), and `starter
// schedule pause`, a second process, releases the hold before it returns,
// printing what the budget then holds, without waiting for the worker's
// next pass.
func TestAWorkerHoldsAndStarterPauseReleasesAtOnce(t *testing.T) {
	c, toml := holdingCluster(t)
	ctx := c.Ctx()
	if _, err := c.Schedules().Create(ctx, operator.ScheduleInput{Pipeline: "evals"}); err != nil {
		t.Fatal(err)
	}
	env := cleanenv.Environ(
		"TEMPORAL_ADDRESS="+c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE="+c.Namespace,
		"TEMPORAL_CONFIG_FILE="+filepath.Join(c.Dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER="+c.LedgerURL,
		"ALLOT_PIPELINES="+writeFile(t, toml),
		"ALLOT_DATA_DIR="+c.Dir,
		"ALLOT_TASK_QUEUE=allot-hold-test",
		"ALLOT_VENDOR_URL="+c.Vendor.URL,
		"ALLOT_VENDOR_API_KEY="+allottest.VendorKey,
		"USER=maria", "HOME="+t.TempDir(),
	)
	worker := startWorker(t, allottest.BuildBinary(t, "allot/worker"), env)
	defer worker.Signal(t, syscall.SIGTERM)
	b, _ := c.Pipelines.Budget("evals-monthly")
	period := b.PeriodOf(time.Now())
	view := func() ledger.BudgetPeriod {
		t.Helper()
		bp, err := c.Ledger.BudgetPeriodOf(ctx, ledger.LimitOf(b), period)
		if err != nil {
			t.Fatal(err)
		}
		return bp
	}
	for deadline := allottest.Deadline(t, time.Minute); view().HeldRuns == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the worker wrote no hold for the Schedule's runs; its output:\n%s", worker.Output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h := view(); h.HeldForSchedule != int64(h.HeldRuns)*250 {
		t.Fatalf("the worker holds %d for %d runs, want 250 each", h.HeldForSchedule, h.HeldRuns)
	}
	starter := allottest.Starter{Bin: allottest.BuildBinary(t, "allot/starter"), Dir: t.TempDir(), Env: env}
	out := string(starter.Out(t, "schedule", "pause", "--pipeline", "evals", "--note", "hold test"))
	if want := regexp.MustCompile(`budget evals-monthly\s+period ` + period + ` holds 0\.00 USD for 0 scheduled runs; 10000\.00 USD free`); !want.MatchString(out) {
		t.Fatalf("schedule pause printed:\n%s\nwant %s", out, want)
	}
	if h := view(); h.HeldRuns != 0 || h.HeldForSchedule != 0 {
		t.Fatalf("after schedule pause returned the budget holds %d for %d runs, want its hold released", h.HeldForSchedule, h.HeldRuns)
	}
}
