package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/workflows"
)

// Every command line allot prints for an operator (allot's commandlines.go)
// is one the starter takes: its subcommand and flags exist and its values
// parse. Renaming a flag without its builder fails here. Each runs against
// nothing (a context already cancelled, Temporal at a closed port, a
// ledger that does not exist), so nothing is contacted or written; the
// integration tests (e2e/remedy_test.go, e2e/docs_commands_integration_test.go)
// run them end to end.
func TestPrintedCommandLinesParse(t *testing.T) {
	from := time.Date(2026, 7, 6, 0, 0, 0, 0, time.UTC)
	lines := map[string]string{
		"show":           allot.ShowCommand("weekly-video", "2026-W32-0"),
		"lookup":         allot.LookupCommand("weekly-video", "2026-W32-0", "video"),
		"adopt":          allot.AdoptCommand("weekly-video", "2026-W32-0", "video", "vt_0123"),
		"retry":          allot.RetryCommand("weekly-video", "2026-W32-0", "video"),
		"resubmit":       allot.ResubmitCommand("weekly-video", "2026-W32-0", "video"),
		"abandon":        allot.AbandonCommand("weekly-video", "2026-W32-0", "video", "refunded, it's done"),
		"rework":         allot.ReworkCommand("weekly-video", "2026-W32-0", "video"),
		"reassemble":     allot.ReassembleCommand("weekly-video", "2026-W32-0"),
		"resume":         allot.ResumeCommand("weekly-video", "2026-W32-0"),
		"approve":        allot.ApproveCommand("weekly-video", "2026-W32-0"),
		"approve all":    allot.ApproveWaitingCommand("weekly-video"),
		"reject":         allot.RejectCommand("weekly-video", "2026-W32-0", "off-brand"),
		"budget raise":   allot.BudgetRaiseCommand("video-weekly", "2026-W32", 100000, "launch week"),
		"budget show":    allot.BudgetShowCommand("video-weekly", "2026-W32"),
		"backfill":       allot.BackfillCommand("weekly-video", from, from.Add(28*24*time.Hour)),
		"backfill --yes": allot.BackfillCommand("weekly-video", from, from.Add(28*24*time.Hour), "--yes"),
		"catch-up":       allot.CatchUpCommand("weekly-video", from),
		"schedule":       allot.ScheduleCreateCommand("weekly-video"),
		"unpause":        allot.ScheduleUnpauseCommand("weekly-video"),
		"describe":       allot.ScheduleDescribeCommand("weekly-video"),
		"inputs":         allot.InputListCommand("drafts"),
		"vendor resume":  allot.VendorResumeCommand("videogen"),
		"import":         allot.ImportCommand("weekly-video", "old runs/export.jsonl", "--over-cap"),
		"episodes":       allot.EpisodesCommand("weekly-video"),
		"stats":          allot.StatsCommand("weekly-video"),
		"vendor list":    allot.VendorListCommand(),
		"drift list":     allot.DriftListCommand(),
		"drift ack":      allot.DriftAckCommand(7, "disputed, ticket #42"),
		"schedule pause": allot.SchedulePauseCommand("weekly-video", "vendor outage"),
		"console":        allot.ConsoleCommand("127.0.0.1:8090", ""),
	}
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml")
	t.Setenv("ALLOT_VENDOR_URL", "http://127.0.0.1:1")
	t.Setenv("ALLOT_VENDOR_API_KEY", "printed-commands-test-key")
	dir := t.TempDir()
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "none", "allot.db"))
	t.Setenv("ALLOT_PIPELINES", "../pipeline/pipelines.toml")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, line := range lines {
		args, err := workflows.SplitCommand(line)
		if err != nil || len(args) < 2 || args[0] != "starter" {
			t.Errorf("%s: %q is not a starter command line (%v)", name, line, err)
			continue
		}
		var stdout, stderr bytes.Buffer
		if code := execute(ctx, args[1:], &stdout, &stderr); code == exitUsage && !strings.Contains(stderr.String(), "no such file or directory") {
			t.Errorf("%s: `%s` is not a command the starter takes: %s", name, line, stderr.String())
		}
	}
}
