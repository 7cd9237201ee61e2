package e2e

import (
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/pipelinetest"
)

// budgetShortPipelines: one paid step (250 USD cents) under a weekly
// budget that fits one.
var budgetShortPipelines = pipelinetest.Budgeted{Pipeline: "tight", Budget: "tight-budget", Limit: 250,
	Then: []pipelinetest.Step{{Name: "assemble", Kind: "local"}}}.TOML()

// Defect (issue 25): `resolve --retry` on a step parked BudgetExhausted,
// while the budget is still short, answered `stage waiting_vendor`. The
// answer says that the budget still refuses: which budget, how much is
// short, and the raise that admits the step.
func TestRetryOnABudgetParkedStepSaysTheBudgetStillRefuses(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, []byte(budgetShortPipelines))
	bin := allottest.BuildBinary(t, "allot/starter")
	starter := allottest.Starter{Bin: bin, Dir: t.TempDir(), Env: []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + c.Namespace,
		"ALLOT_LEDGER=" + c.LedgerURL, "ALLOT_PIPELINES=" + writeFile(t, budgetShortPipelines), "USER=maria", "HOME=" + t.TempDir(),
	}}
	if first := c.WaitEpisode("tight", c.Allocate("tight", monday())); first.Stage != allot.StageCompleted {
		t.Fatalf("the first episode: %+v", first)
	}
	ep := c.Allocate("tight", monday().Add(time.Hour))
	st := c.WaitStage("tight", ep, allot.StageNeedsAttention)
	if st.Attention == nil || st.Attention.ErrorType != allot.BudgetExhausted {
		t.Fatalf("parked with %+v", st.Attention)
	}
	retry := remedyFor(t, st, "starter episode resolve --pipeline tight --episode "+ep+" --step video --retry")
	out := string(starter.Out(t, allottest.SplitCommand(t, retry)[1:]...))
	t.Logf("retry answered:\n%s", out)
	for _, want := range []string{"tight-budget", "2026-W32", "short 2.50 USD", "starter budget raise tight-budget --period 2026-W32 --limit 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("the retry's answer does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, string(allot.StageWaitingVendor)) {
		t.Errorf("the retry's answer names %s:\n%s", allot.StageWaitingVendor, out)
	}
	if n := c.Vendor.Sim.ChargeCount(); n != 1 {
		t.Fatalf("%d charges against a budget that fits one", n)
	}
}
