package main

import (
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"allot"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/internal/report"
)

// budgetEnv writes budgetPipelinesFile (video-weekly: 5.00 USD a week) and
// creates an empty ledger; it returns the ledger's URL.
func budgetEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, budgetPipelinesFile)
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	t.Setenv("ALLOT_PIPELINES", pipelines)
	t.Setenv("ALLOT_LEDGER", url)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("USER", "maria")
	led, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	return url
}

func budgetRaises(t *testing.T, url string) []ledger.BudgetRaise {
	t.Helper()
	led, err := ledger.OpenReadOnly(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	rs, err := led.BudgetRaises(context.Background(), "video-weekly", "")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func wantRun(t *testing.T, code int, want []string, args ...string) string {
	t.Helper()
	got, stdout, stderr := run(t, args...)
	shown := make([]string, len(args))
	for i, a := range args {
		if shown[i] = a; len(a) > 40 {
			shown[i] = a[:40] + "..."
		}
	}
	if got != code {
		t.Fatalf("%q: exit %d, %.400s%.400s; want exit %d", shown, got, stdout, stderr, code)
	}
	for _, w := range want {
		if !strings.Contains(stdout+stderr, w) {
			t.Fatalf("%q: exit %d, %.400s%.400s; want exit %d saying %q", shown, got, stdout, stderr, code, w)
		}
	}
	return stdout
}

// budget set-limit (and its older name raise) says what it did: raised,
// lowered, unchanged (recording nothing) or already recorded; a request ID
// reused with other arguments is refused with both requests shown.
func TestBudgetSetLimitSaysWhatItDid(t *testing.T) {
	url := budgetEnv(t)
	set := []string{"budget", "set-limit", "video-weekly", "--period", "2026-W32", "--reason", "launch week"}
	with := func(extra ...string) []string { return append(append([]string{}, set...), extra...) }

	wantRun(t, exitOK, []string{"unchanged", "5.00 USD already"}, with("--limit", "500")...)
	if rs := budgetRaises(t, url); len(rs) != 0 {
		t.Fatalf("an unchanged limit recorded %+v", rs)
	}
	wantRun(t, exitOK, []string{"raised", "from 5.00 USD to 10.00 USD", "by maria"}, with("--limit", "1000", "--request-id", "r1")...)
	wantRun(t, exitOK, []string{"already recorded (request r1)", "10.00 USD"}, with("--limit", "1000", "--request-id", "r1")...)
	wantRun(t, exitError, []string{"RequestConflict", "request r1", "limit 10.00 USD", "limit 20.00 USD", "new --request-id"}, with("--limit", "2000", "--request-id", "r1")...)
	wantRun(t, exitOK, []string{"lowered", "from 10.00 USD to 8.00 USD"}, "budget", "raise", "video-weekly", "--period", "2026-W32", "--limit", "800", "--reason", "quiet week")
	// The budget's name may come after the flags.
	wantRun(t, exitOK, []string{"unchanged"}, "budget", "set-limit", "--period", "2026-W32", "--limit", "800", "--reason", "x", "video-weekly")
	if rs := budgetRaises(t, url); len(rs) != 2 || rs[0].Limit != 1000 || rs[1].Limit != 800 {
		t.Fatalf("raises %+v; want 1000 then 800", rs)
	}

	// Unclear limits get the conversion or the rule.
	for limit, want := range map[string]string{
		"12.50":     "--limit takes minor units of USD: 12.50 USD is --limit 1250",
		"12.50 USD": "--limit takes minor units of USD: 12.50 USD is --limit 1250",
		"12.5 EUR":  "in USD, not EUR",
		"0":         "--limit 0 must be positive",
		"lots":      "integer of minor units of USD",
	} {
		wantRun(t, exitError, []string{want}, with("--limit", limit)...)
	}
	// Free text is bounded, before anything is written.
	wantRun(t, exitUsage, []string{"--reason is 100000 characters", "limit of 1000"}, "budget", "set-limit", "video-weekly", "--period", "2026-W33", "--limit", "900", "--reason", strings.Repeat("a", 100000))
	wantRun(t, exitUsage, []string{"--reason has a control character"}, "budget", "set-limit", "video-weekly", "--period", "2026-W33", "--limit", "900", "--reason", "x\x1b[2J")
	wantRun(t, exitUsage, []string{"--by is 1001 characters"}, "budget", "set-limit", "video-weekly", "--period", "2026-W33", "--limit", "900", "--reason", "x", "--by", strings.Repeat("b", 1001))
	if rs := budgetRaises(t, url); len(rs) != 2 {
		t.Fatalf("refused requests recorded %+v", rs[2:])
	}
}

// Without $USER, who acts is the operating system's user, the same for
// every command that records it.
func TestActorWithoutUSERIsTheOSUser(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Skipf("the operating system names no user: %v", err)
	}
	url := budgetEnv(t)
	t.Setenv("USER", "")
	wantRun(t, exitOK, []string{"raised", "by " + u.Username}, "budget", "set-limit", "video-weekly", "--period", "2026-W32", "--limit", "900", "--reason", "x")
	if rs := budgetRaises(t, url); len(rs) != 1 || rs[0].By != u.Username {
		t.Fatalf("raises %+v; want one by %s", rs, u.Username)
	}

	vendorEnv(t)
	created, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	t.Setenv("USER", "")
	wantRun(t, exitOK, []string{"paused"}, "vendor", "pause", "videogen", "--reason", "bills twice")
	if v := listVendors(t)["videogen"]; v.PausedBy != u.Username {
		t.Fatalf("vendor paused by %q; want the OS user %q", v.PausedBy, u.Username)
	}
	wantRun(t, exitUsage, []string{"--reason is 1001 characters"}, "vendor", "pause", "default", "--reason", strings.Repeat("r", allot.MaxTextLen+1))
}

// A flag given twice is refused in every command: the flag package would
// keep the last value silently.
func TestRepeatedFlagsAreRefused(t *testing.T) {
	budgetEnv(t)
	for _, args := range [][]string{
		{"budget", "set-limit", "video-weekly", "--period", "2026-W49", "--limit", "900", "--reason", "x", "--period", "2026-W50"},
		{"budget", "show", "video-weekly", "--period=2026-W49", "--period", "2026-W50"},
		{"input", "add", "--pipeline", "weekly", "--ref", "a", "--ref", "b"},
		{"episode", "approve", "--pipeline", "weekly", "--episode", "2026-W32-0", "--reason", "a", "--reason", "b"},
		{"schedule", "create", "--pipeline", "weekly", "--jitter", "1s", "--jitter", "2s"},
	} {
		wantRun(t, exitUsage, []string{"--" + map[string]string{"budget": "period", "input": "ref", "episode": "reason", "schedule": "jitter"}[args[0]] + " is given twice: give it once"}, args...)
	}
	if rs := budgetRaises(t, os.Getenv("ALLOT_LEDGER")); len(rs) != 0 {
		t.Fatalf("a refused command recorded %+v", rs)
	}
	// A switch given twice means the same; a value after the flags is not a
	// flag's second value.
	var res report.BudgetsResult
	out := wantRun(t, exitOK, nil, "budget", "list", "--json", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("budget list --json --json: %v: %s", err, out)
	}
}
