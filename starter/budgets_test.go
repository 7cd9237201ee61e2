package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/internal/report"
)

// budgetPipelinesFile: weekly, one paid step (250) under video-weekly, 5.00
// USD a week.
var budgetPipelinesFile = pipelinetest.Budgeted{Limit: 500}.TOML()

// starter budget list, show and raise: a raise is refused (exit 1, the
// type under --json) and writes nothing when malformed; a valid one is
// recorded with who and why, for its period only.
func TestBudgetListShowRaise(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, budgetPipelinesFile)
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	t.Setenv("ALLOT_PIPELINES", pipelines)
	t.Setenv("ALLOT_LEDGER", url)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("USER", "maria")
	ctx := context.Background()
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: "weekly/k", Period: "2026-W32", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episode.ID, Step: "video"}
	if _, err := led.WriteIntentReserving(ctx, ref, allot.IdempotencyKey("weekly", res.Episode.ID, "video", 0), "w",
		[]allot.Reservation{{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 500, Amount: 250}}); err != nil {
		t.Fatal(err)
	}
	// The week holds 1.00 USD for one scheduled run still due.
	if _, err := led.HoldScheduled(ctx, ledger.HoldInput{Budget: ledger.BudgetLimit{Budget: "video-weekly", Currency: "USD", Limit: 500}, Period: "2026-W32",
		Runs: []ledger.ScheduledRun{{Pipeline: "weekly", At: nominal.Add(24 * time.Hour), Amount: 100}}, At: nominal}); err != nil {
		t.Fatal(err)
	}
	led.Close()

	code, stdout, stderr := run(t, "budget", "list", "--json")
	var list report.BudgetsResult
	if code != exitOK || json.Unmarshal([]byte(stdout), &list) != nil || len(list.Budgets) != 1 {
		t.Fatalf("budget list: exit %d %s %s", code, stdout, stderr)
	}
	found := false
	for _, p := range list.Budgets[0].Periods {
		if p.Period == "2026-W32" {
			found = p.Reserved == 250 && p.HeldForSchedule == 100 && p.HeldRuns == 1 && p.Free == 150
		}
	}
	if !found {
		t.Fatalf("budget list lacks 2026-W32 with 2.50 USD reserved, 1.00 USD held for 1 scheduled run and 1.50 USD free: %s", stdout)
	}
	if code, stdout, _ := run(t, "budget", "list"); code != exitOK || !regexp.MustCompile(`RESERVED\s+HELD\s+FREE`).MatchString(stdout) ||
		!regexp.MustCompile(`2026-W32\s+5\.00 USD\s+0\.00 USD\s+2\.50 USD\s+1\.00 USD \(1 scheduled runs\)\s+1\.50 USD`).MatchString(stdout) {
		t.Fatalf("budget list shows no hold for the schedule:\n%s", stdout)
	}
	if code, stdout, _ := run(t, "budget", "show", "video-weekly", "--period", "2026-W32"); code != exitOK || !strings.Contains(stdout, "weekly/"+res.Episode.ID) || !strings.Contains(stdout, "2.50 USD") {
		t.Fatalf("budget show: exit %d\n%s", code, stdout)
	}

	for args, want := range map[string]string{
		"budget raise video-weekly --period 2026-W32 --limit 100 --reason x":       "would be exceeded",
		"budget raise video-weekly --period 2026-08 --limit 1000 --reason x":       "ISO weeks",
		"budget raise nope --period 2026-W32 --limit 1000 --reason x":              "not defined",
		"budget raise video-weekly --period 2026-W32 --limit 1000":                 "required",
		"budget raise video-weekly --period 2026-W32 --limit -5 --reason x":        "must be positive",
		"budget raise video-weekly --period 2026-W32 --limit 1000 --reason x --by": "flag needs an argument",
	} {
		code, _, stderr := run(t, strings.Fields(args)...)
		if code == exitOK || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want a refusal naming %q", args, code, stderr, want)
		}
	}
	code, stdout, _ = run(t, "budget", "raise", "video-weekly", "--period", "2026-W32", "--limit", "-5", "--reason", "x", "--json")
	var refusal map[string]string
	if code != exitError || json.Unmarshal([]byte(stdout), &refusal) != nil || refusal["type"] != "InvalidInput" {
		t.Fatalf("a refused raise under --json: exit %d %s", code, stdout)
	}
	code, stdout, stderr = run(t, "budget", "raise", "video-weekly", "--period", "2026-W32", "--limit", "1000", "--reason", "launch week")
	if code != exitOK || !strings.Contains(stdout, "10.00 USD") || !strings.Contains(stdout, "maria") {
		t.Fatalf("budget raise: exit %d\n%s\n%s", code, stdout, stderr)
	}
	led, err = ledger.OpenReadOnly(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	raises, err := led.BudgetRaises(ctx, "video-weekly", "")
	if err != nil || len(raises) != 1 || raises[0].By != "maria" || raises[0].Reason != "launch week" || raises[0].Period != "2026-W32" || raises[0].Limit != 1000 {
		t.Fatalf("raises %+v, %v", raises, err)
	}
}
