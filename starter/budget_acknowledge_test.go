package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/workflows"
)

// check flags a charge outside a budget's records with the command that
// acknowledges it; that command, run as printed, records who and why, and
// check turns green; budget show then lists the charges as acknowledged,
// and a second acknowledgement is refused, writing nothing (issue 41 §1).
func TestBudgetAcknowledgeIsTheRemedyCheckPrints(t *testing.T) {
	l := ledgertest.New(t)
	l.ChargeWithoutReservation("weekly", ledgertest.BudgetMonday.Add(10*time.Hour), "vt_early", 300)
	l.Led.Close()
	t.Setenv("ALLOT_PIPELINES", pipelinetest.Write(t, t.TempDir(), ledgertest.BudgetSet))
	t.Setenv("ALLOT_LEDGER", "sqlite:"+l.Path)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("USER", "maria")

	code, stdout, stderr := run(t, "check")
	if code == exitOK || !strings.Contains(stdout+stderr, "charge_unreserved") {
		t.Fatalf("check of a charge outside the budgets: exit %d\n%s%s", code, stdout, stderr)
	}
	printed := regexp.MustCompile(`starter budget acknowledge \S+ --period \S+ --reason '[^']*'`).FindAllString(stdout+stderr, -1)
	seen := map[string]bool{}
	for _, cmd := range printed {
		if seen[cmd] {
			continue
		}
		seen[cmd] = true
		words, err := workflows.SplitCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := run(t, words[1:]...); code != exitOK || !regexp.MustCompile(`acknowledged\s+weekly/`).MatchString(out) || !strings.Contains(out, "by maria") {
			t.Fatalf("%s: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("check printed %d acknowledge commands, want one per budget covering the charge (2):\n%s%s", len(seen), stdout, stderr)
	}
	if code, stdout, stderr := run(t, "check"); code != exitOK || strings.Contains(stdout, "charge_unreserved") {
		t.Fatalf("check after the acknowledgements: exit %d\n%s%s", code, stdout, stderr)
	}
	_, show, _ := run(t, "budget", "show", "video-weekly", "--period", "2026-W32")
	if !regexp.MustCompile(`outside its records\s+3\.00 USD`).MatchString(show) || !strings.Contains(show, "acknowledged by maria") {
		t.Fatalf("budget show after the acknowledgement:\n%s", show)
	}
	code, stdout, stderr = run(t, "budget", "acknowledge", "video-weekly", "--period", "2026-W32", "--reason", "again")
	if code != exitError || stdout != "" || !strings.Contains(stderr, "no charge outside its records left to acknowledge") {
		t.Fatalf("a second acknowledgement: exit %d, %q %q", code, stdout, stderr)
	}
	if _, err := os.Stat(l.Path); err != nil {
		t.Fatal(err)
	}
}
