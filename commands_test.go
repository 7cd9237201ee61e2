package allot

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the docs' generated sections from the code")

// commandTablePage holds the paid command table.
const commandTablePage = "docs/operating.md"

// The command table in docs/operating.md is the one the code enforces. After changing
// the table, run `go test -run TestCommandTable . -update`.
func TestCommandTableMatchesTheCode(t *testing.T) {
	data, err := os.ReadFile(commandTablePage)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- paid-command-table:begin -->\n", "<!-- paid-command-table:end -->"
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/operating.md has no %q ... %q section", begin, end)
	}
	if got, want := s[i+len(begin):j], PaidCommandTableMarkdown(); got != want {
		if *update {
			if err := os.WriteFile(commandTablePage, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("docs/operating.md's command table differs from the code's: run `go test -run TestCommandTable . -update`; it should read:\n%s", want)
	}
}

// Every parked state has an exit: each (state, attention) an episode can be
// parked in allows at least one command, and every action has an effect
// written down.
func TestEveryParkedStateHasAnExit(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, r := range PaidCommandTable {
		k := [2]string{string(r.State), r.Attention}
		if seen[k] {
			t.Errorf("(%s, %s) is listed twice", r.State, r.Attention)
		}
		seen[k] = true
		if len(r.Allowed) == 0 {
			t.Errorf("(%s, %s) allows nothing", r.State, r.Attention)
		}
		for _, a := range r.Allowed {
			if ActionEffects[a] == "" || !slices.Contains(Actions, a) {
				t.Errorf("(%s, %s) allows %q, which has no effect written down or is not an action", r.State, r.Attention, a)
			}
		}
	}
	for _, attention := range []string{OutcomeUnknown, IdempotencyHorizonPassed, VendorRejected, VendorTaskFailed, ResultHashMismatch, InvalidRemoteRef, VendorNotConfigured, BudgetExhausted, BatchResultLost} {
		found := false
		for k := range seen {
			found = found || k[1] == attention
		}
		if !found {
			t.Errorf("no paid-task state is listed for attention %s", attention)
		}
	}
	if err := CheckPaidAction(ActionRework, "video", PaidIntent, OutcomeUnknown); err == nil {
		t.Error("rework of an unknown outcome is allowed")
	}
	if err := CheckPaidAction(ActionAdopt, "video", PaidIntent, ""); err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("a command on a running step: %v", err)
	}
}

// A second approve says the episode is past approval (issue 15), not to
// approve it once it reaches a gate it has passed; an approve before the
// gate still says to wait for it. The decision is the stage's alone.
func TestApproveAfterTheGateSaysPastApproval(t *testing.T) {
	for _, c := range []struct {
		stage     Stage
		approvals []StepStatus
		want      string
	}{
		{StageRunning, []StepStatus{StepApproved}, "already approved and past approval"},
		{StageCompleted, []StepStatus{StepApproved}, "already approved and past approval"},
		{StageRejected, []StepStatus{StepRejected}, "already rejected and past approval"},
		{StageRunning, []StepStatus{StepPending}, "once it reaches the approval step"},
		{StageRunning, []StepStatus{StepApproved, StepPending}, "once it reaches the approval step"},
		{StageRunning, nil, "once it reaches the approval step"},
	} {
		for _, action := range []Action{ActionApprove, ActionReject} {
			err := EpisodeActionAllowed(action, c.stage, c.approvals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s at %s with approvals %v: %v, want a refusal saying %q", action, c.stage, c.approvals, err, c.want)
			}
		}
	}
	if err := EpisodeActionAllowed(ActionApprove, StageWaitingApproval, []StepStatus{StepPending}); err != nil {
		t.Errorf("approve at the gate: %v", err)
	}
}
