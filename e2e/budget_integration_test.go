package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/operator"
	"allot/internal/pipelinetest"
	"allot/internal/report"
	"allot/workflows"
)

// budgetedPipelines: one paid step (the simulator charges 250 USD cents)
// under a weekly budget that fits three.
var budgetedPipelines = pipelinetest.Budgeted{Pipeline: "budgeted", Budget: "weekly-budget", Limit: 750, Alerts: []float64{0.5},
	Then: []pipelinetest.Step{{Name: "assemble", Kind: "local"}}}.TOML()

// Invariant 20 on a real server: six concurrent runs in one week against a
// weekly budget that fits three. The vendor is charged three times; three
// episodes park BudgetExhausted, naming the budget and the raise that
// admits them, and send nothing. The printed retry asks the budget again
// (and parks again); the printed raise, as printed, admits one more (the
// raise nudges the parked, which resume by themselves); after a raise for
// the other two, all six complete with six charges, the week at its raised
// limit to the cent.
func TestBudgetAdmitsWhatFitsAndResumesAfterARaise(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(budgetedPipelines))
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := writeFile(t, budgetedPipelines)
	starter := allottest.Starter{Bin: bin, Dir: t.TempDir(), Env: []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + c.Namespace,
		"ALLOT_LEDGER=" + c.LedgerURL, "ALLOT_PIPELINES=" + pipelinesFile, "USER=maria", "HOME=" + t.TempDir(),
	}}

	// Six runs at once, all in 2026-W32.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		episodes []string
	)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Runs.Run(c.Ctx(), operator.RunInput{Pipeline: "budgeted", NominalTime: monday().Add(time.Duration(i) * time.Hour), Wait: true})
			if err != nil || res.Result == nil || res.Result.EpisodeID == "" {
				t.Errorf("run %d: %+v, %v", i, res, err)
				return
			}
			mu.Lock()
			episodes = append(episodes, res.Result.EpisodeID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(episodes) != 6 {
		t.Fatalf("episodes %v", episodes)
	}
	// Each one completes or parks (FollowEpisode waits for either).
	var done, parked []string
	states := map[string]workflows.EpisodeState{}
	for _, ep := range episodes {
		st, err := operator.FollowEpisode(c.Ctx(), c.Client, "budgeted", ep, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		states[ep] = st
		switch st.Stage {
		case allot.StageCompleted:
			done = append(done, ep)
		case allot.StageNeedsAttention:
			parked = append(parked, ep)
		}
	}
	if len(done) != 3 || len(parked) != 3 {
		t.Fatalf("%d completed and %d parked, want 3 and 3", len(done), len(parked))
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 3 {
		t.Fatalf("the vendor charged %d times against a budget for 3", n)
	}
	att := states[parked[0]].Attention
	if att == nil || att.ErrorType != allot.BudgetExhausted || len(att.Budgets) != 1 {
		t.Fatalf("attention %+v", att)
	}
	if b := att.Budgets[0]; b.Budget != "weekly-budget" || b.Period != "2026-W32" || b.Limit != 750 || b.Settled+b.Reserved != 750 || b.Asked != 250 {
		t.Fatalf("the refusal names %+v", b)
	}
	for _, want := range []string{"weekly-budget", "2026-W32", "limit 7.50 USD", "asked 2.50 USD"} {
		if !strings.Contains(att.Reason, want) {
			t.Fatalf("the reason %q does not name %q", att.Reason, want)
		}
	}
	if !strings.HasPrefix(att.Remedies[0], "starter budget raise weekly-budget --period 2026-W32 --limit 1000 --reason ") {
		t.Fatalf("remedies %q: the first raises the budget", att.Remedies)
	}

	// The printed retry, as printed: the budget is asked again, refuses
	// again, nothing is sent.
	var retry string
	for _, r := range att.Remedies {
		if strings.HasSuffix(r, " --retry") {
			retry = r
		}
	}
	words, err := workflows.SplitCommand(retry)
	if err != nil || len(words) < 2 || words[0] != "starter" {
		t.Fatalf("remedy %q: %v", retry, err)
	}
	starter.Out(t, words[1:]...)
	st := c.WaitStage("budgeted", parked[0], allot.StageNeedsAttention)
	if st.Attention == nil || st.Attention.ErrorType != allot.BudgetExhausted || c.Vendor.Sim.ChargeCount() != 3 {
		t.Fatalf("after the retry: %+v, %d charges", st.Attention, c.Vendor.Sim.ChargeCount())
	}

	// list shows the week full with three parked on it.
	var list report.BudgetsResult
	starter.JSON(t, &list, "budget", "list", "weekly-budget")
	var w32 *report.BudgetPeriodView
	for i, p := range list.Budgets[0].Periods {
		if p.Period == "2026-W32" {
			w32 = &list.Budgets[0].Periods[i]
		}
	}
	if w32 == nil || w32.Settled != 750 || w32.Free != 0 || len(w32.Parked) != 3 {
		t.Fatalf("budget list: %+v", w32)
	}

	// The printed raise, as printed: the week fits one more; the raise
	// nudges the three, one is admitted and charged, two park again.
	words, err = workflows.SplitCommand(att.Remedies[0])
	if err != nil {
		t.Fatal(err)
	}
	starter.Out(t, words[1:]...)
	deadline := allottest.Deadline(t, 2*time.Minute)
	for c.Vendor.Sim.ChargeCount() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the printed raise admitted nothing in 2 minutes: %d charges", c.Vendor.Sim.ChargeCount())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var again []string
	for _, ep := range parked {
		st, err := operator.FollowEpisode(c.Ctx(), c.Client, "budgeted", ep, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// A state still showing the old refusal: ask once it moved.
		for st.Stage == allot.StageNeedsAttention && st.Attention.Budgets[0].Limit == 750 {
			if time.Now().After(deadline) {
				t.Fatalf("episode %s still shows the old refusal: %+v", ep, st.Attention)
			}
			time.Sleep(100 * time.Millisecond)
			if st, err = operator.FollowEpisode(c.Ctx(), c.Client, "budgeted", ep, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if st.Stage == allot.StageNeedsAttention {
			again = append(again, ep)
		}
	}
	if len(again) != 2 || c.Vendor.Sim.ChargeCount() != 4 {
		t.Fatalf("after the printed raise: %d parked again, %d charges; want 2 and 4", len(again), c.Vendor.Sim.ChargeCount())
	}

	// Raise the week for the other two: they resume by themselves.
	var raised operator.RaiseResult
	starter.JSON(t, &raised, "budget", "raise", "weekly-budget", "--period", "2026-W32", "--limit", "1500", "--reason", "two more videos this week")
	if !raised.Applied || raised.Raise.By != "maria" || len(raised.Nudged) != 2 {
		t.Fatalf("raise: %+v", raised)
	}
	for _, ep := range parked {
		if final := c.WaitEpisode("budgeted", ep); final.Stage != allot.StageCompleted {
			t.Fatalf("episode %s after the raise: %+v", ep, final)
		}
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 6 {
		t.Fatalf("%d charges after the raise, want 6", n)
	}
	var show report.BudgetShowResult
	starter.JSON(t, &show, "budget", "show", "weekly-budget", "--period", "2026-W32")
	if p := show.Budget.Periods[0]; p.Settled != 1500 || p.Reserved != 0 || p.Limit != 1500 || len(show.Tasks) != 6 || len(show.Raises) != 2 {
		t.Fatalf("budget show: %+v, %d tasks, raises %+v", p, len(show.Tasks), show.Raises)
	}
	// The other weeks keep their limit.
	out := starter.Out(t, "budget", "show", "weekly-budget", "--period", "2026-W33", "--json")
	var w33 report.BudgetShowResult
	if err := json.Unmarshal(out, &w33); err != nil || w33.Budget.Periods[0].Limit != 750 {
		t.Fatalf("2026-W33 after raising 2026-W32: %s", out)
	}
	// check: every period within its limit, every reservation settled.
	starter.Out(t, "check")
	// The worker's metrics: the budget's current week, by its real name.
	b, _ := c.Pipelines.Budget("weekly-budget")
	resp, err := http.Get(c.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `allot_budget_limit_minor_units{budget="weekly-budget",currency="USD",period="` + b.PeriodOf(time.Now()) + `"} 750`; err != nil || !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %q (%v)", want, err)
	}

	// Consent counted in money: six hourly runs of 2026-W33 reserve
	// 15.00 USD against the 7.50 USD the week has free. The dry run says
	// so; the backfill is refused without --yes and sends nothing.
	starter.Out(t, "schedule", "create", "--pipeline", "budgeted", "--interval", "1h", "--paused")
	from, to := monday().Add(7*24*time.Hour), monday().Add(7*24*time.Hour+6*time.Hour)
	dry := string(starter.Out(t, "schedule", "backfill", "--pipeline", "budgeted", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--dry-run"))
	for _, want := range []string{"budget weekly-budget period 2026-W33: 6 runs x 2.50 USD = 15.00 USD, free 7.50 USD: OVER by 7.50 USD", "--yes"} {
		if !strings.Contains(dry, want) {
			t.Fatalf("the dry run does not say %q:\n%s", want, dry)
		}
	}
	out, err = starter.Run("schedule", "backfill", "--pipeline", "budgeted", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--json")
	var refusal map[string]string
	if err == nil || json.Unmarshal([]byte(firstLine(string(out))), &refusal) != nil || refusal["type"] != allot.ConsentRequired ||
		!strings.Contains(refusal["error"], "OVER by 7.50 USD") || !strings.Contains(refusal["error"], "--yes") {
		t.Fatalf("a backfill over the budget without --yes: %v\n%s", err, out)
	}
	if n := c.CountWorkflows(`WorkflowType = "ScheduledRun" AND AllotPipeline = "budgeted"`); n != 6 {
		t.Fatalf("%d ScheduledRuns after the refused backfill, want the 6 runs only", n)
	}
	if !strings.Contains(c.Logs.String(), "budget threshold crossed") {
		t.Error("the 50 % alert was not logged")
	}
}
