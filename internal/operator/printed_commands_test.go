package operator

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/workflows"
)

// printedAction is the episode action a printed `starter` command line asks
// for, read back the way a shell splits it: "lookup" for the read-only
// look-up (it leads to adopt), "" for a command that is no episode action
// (a budget raise).
func printedAction(t *testing.T, line string) allot.Action {
	t.Helper()
	words, err := workflows.SplitCommand(line)
	if err != nil {
		t.Fatalf("printed command %q does not parse: %v", line, err)
	}
	if len(words) < 3 || words[0] != "starter" {
		t.Fatalf("printed command %q is not a starter command", line)
	}
	switch {
	case words[1] == "budget":
		return ""
	case words[1] != "episode":
		t.Fatalf("printed command %q is not an episode command", line)
	}
	switch words[2] {
	case "lookup":
		return "lookup"
	case "rework":
		return allot.ActionRework
	case "reassemble":
		return allot.ActionReassemble
	case "resolve":
		for _, w := range words[3:] {
			switch w {
			case "--adopt":
				return allot.ActionAdopt
			case "--retry":
				return allot.ActionRetry
			case "--resubmit":
				return allot.ActionResubmit
			case "--abandon":
				return allot.ActionAbandon
			}
		}
	}
	t.Fatalf("printed command %q names no action", line)
	return ""
}

// checkPrinted fails unless the episode takes every command in lines for
// a step in state with attention (the look-up stands for adopt).
func checkPrinted(t *testing.T, where string, state allot.PaidTaskState, attention string, lines []string) {
	t.Helper()
	for _, line := range lines {
		action := printedAction(t, line)
		switch action {
		case "":
			if attention != allot.BudgetExhausted {
				t.Errorf("%s: a budget raise printed for %s/%q", where, state, attention)
			}
			continue
		case "lookup":
			action = allot.ActionAdopt
		}
		if err := allot.CheckPaidAction(action, "video", state, attention); err != nil {
			t.Errorf("%s: printed %q, which the episode refuses: %v", where, line, err)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]*)`")

// Defect (issue 25): on a step parked IdempotencyHorizonPassed the lookup
// printed `resolve --retry` as next, which the episode refuses. Every
// command the look-up (and the episode's remedies) print, for every row of
// the command table and for a step that is running, and for each answer of
// the vendor, is one the episode takes in that same state.
func TestEveryPrintedCommandIsOneTheEpisodeTakes(t *testing.T) {
	type row struct {
		state     allot.PaidTaskState
		attention string
	}
	rows := []row{{allot.PaidPlanned, ""}, {allot.PaidIntent, ""}, {allot.PaidSubmitted, ""}}
	for _, r := range allot.PaidCommandTable {
		rows = append(rows, row{r.State, r.Attention})
	}
	answers := map[lookupAnswer]string{lookupFound: "found", lookupNotFound: "not found", lookupUnsupported: "unsupported", lookupUnreachable: "unreachable"}
	for _, r := range rows {
		where := string(r.state) + "/" + r.attention
		checkPrinted(t, where+" remedies", r.state, r.attention, workflows.Remedies("weekly", "2026-W32-0", "video", r.state, r.attention))
		for answer, name := range answers {
			next := nextAfterLookup("weekly", "2026-W32-0", "video", r.state, r.attention, answer, "task-1")
			if next != "" {
				checkPrinted(t, where+" lookup "+name, r.state, r.attention, []string{next})
			}
		}
		var inText []string
		for _, m := range backticked.FindAllStringSubmatch(unreachableThen("weekly", "2026-W32-0", "video", r.state, r.attention), -1) {
			if m[1] != allot.ShowCommand("weekly", "2026-W32-0") {
				inText = append(inText, m[1])
			}
		}
		checkPrinted(t, where+" lookup unreachable", r.state, r.attention, inText)
	}
	// A parked step the vendor has nothing for always gets a command
	// that moves it on.
	for _, r := range rows {
		if r.attention != "" && r.attention != allot.AttentionWaitingVendor && (r.state == allot.PaidPlanned || r.state == allot.PaidIntent) {
			if nextAfterLookup("weekly", "2026-W32-0", "video", r.state, r.attention, lookupNotFound, "") == "" {
				t.Errorf("%s/%s: the look-up found nothing and prints no next command", r.state, r.attention)
			}
		}
	}
	// Past the horizon, nothing found: resubmit, never retry.
	next := nextAfterLookup("weekly", "2026-W32-0", "video", allot.PaidIntent, allot.IdempotencyHorizonPassed, lookupNotFound, "")
	if next != allot.ResubmitCommand("weekly", "2026-W32-0", "video") {
		t.Errorf("past the horizon the look-up prints %q", next)
	}
	// A settled episode's reopen commands: reassemble, and rework of a
	// paid step that settled.
	for _, line := range workflows.ReopenCommands("weekly", "2026-W32-0", []string{"video"}) {
		switch a := printedAction(t, line); a {
		case allot.ActionReassemble:
			if err := allot.EpisodeActionAllowed(a, allot.StageCompleted, nil); err != nil {
				t.Errorf("reopen %q: %v", line, err)
			}
		default:
			if !slices.Contains(allot.PaidActionsAllowed(allot.PaidSucceeded, ""), a) {
				t.Errorf("reopen %q is refused on a succeeded step", line)
			}
		}
	}
}

// noTask is a vendor that holds nothing under any key.
type noTask struct{}

func (noTask) Submit(context.Context, paidvendor.SubmitRequest) (paidvendor.Task, error) {
	return paidvendor.Task{}, errors.New("the look-up sends nothing")
}
func (noTask) LookupByIdempotencyKey(context.Context, string) (paidvendor.Task, error) {
	return paidvendor.Task{}, paidvendor.ErrNotFound
}

// Without Temporal the ledger's recorded outcome says why the episode is
// parked: past the horizon, a vendor with nothing under the key gets the
// resubmit and a note that the step may have been sent, never a retry.
func TestLookupPastTheHorizonFromTheLedgerAlone(t *testing.T) {
	l := newTestLedger(t)
	ep := l.Allocate("weekly", mon)
	ctx := context.Background()
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
	if _, err := l.led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly", ep.ID, "video", 0), "op-test"); err != nil {
		t.Fatal(err)
	}
	if err := l.led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeNeedsAttention, allot.IdempotencyHorizonPassed, mon); err != nil {
		t.Fatal(err)
	}
	res, err := Lookup(ctx, l.led, noTask{}, testPipelines(t), LookupInput{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attention != allot.IdempotencyHorizonPassed || res.Next != allot.ResubmitCommand("weekly", ep.ID, "video") || !strings.Contains(res.Note, "may still have been sent") {
		t.Fatalf("lookup %+v", res)
	}
}
