package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
)

// A backfill is counted before it is sent, with the server's own
// computation; above the pipeline's max_backfill_runs it needs consent;
// --dry-run says how many runs, the first and last, and how many already
// have episodes; the range is [from, to), so a time on --to does not run;
// and the progress is read from the ledger until every run has ended.
func TestBackfillIsCountedBeforeItIsSentAndEndsBeforeTo(t *testing.T) {
	c := allottest.NewCluster(t)
	s := c.Schedules()
	ctx := c.Ctx()
	if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "weekly-video", Override: pipeline.Schedule{Interval: "1h"}, Paused: true}); err != nil {
		t.Fatal(err)
	}
	from := monday().Truncate(24 * time.Hour) // 2026-08-03T00:00:00Z: the times fall on the hours
	to := from.Add(3 * time.Hour)
	keys := []string{}
	for i := range 4 {
		keys = append(keys, allot.AllocationKey("weekly-video", from.Add(time.Duration(i)*time.Hour)))
	}
	// One of the times already ran by hand: the backfill gives it its
	// episode back.
	manual := c.Allocate("weekly-video", from.Add(time.Hour))

	dry, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Runs != 3 || !dry.First.Equal(from) || !dry.Last.Equal(from.Add(2*time.Hour)) || dry.Existing == nil || *dry.Existing != 1 ||
		dry.Sent || dry.MaxRuns != pipeline.DefaultMaxBackfillRuns {
		t.Fatalf("dry run %+v (existing %v), want 3 runs from %s to %s, 1 with an episode, nothing sent", dry, dry.Existing, from, from.Add(2*time.Hour))
	}

	// More runs than max_backfill_runs: refused, with the count, unless --yes.
	_, err = s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to, Override: pipeline.Schedule{MaxBackfillRuns: 2}})
	if !errors.Is(err, operator.ErrBackfillNeedsConsent) || !strings.Contains(err.Error(), "starts 3 runs") || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("backfill of 3 runs over a maximum of 2: %v", err)
	}
	// The count is the server's, past its 1000 times per answer: 60 days of
	// an hourly schedule are 1440 runs.
	big, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from.Add(-60 * 24 * time.Hour), To: from, DryRun: true})
	if err != nil || big.Runs != 1440 {
		t.Fatalf("dry run of 60 days: %d runs, %v; want 1440", big.Runs, err)
	}
	if _, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from.Add(-60 * 24 * time.Hour), To: from}); !errors.Is(err, operator.ErrBackfillNeedsConsent) {
		t.Fatalf("1440 runs over the default maximum: %v", err)
	}
	time.Sleep(time.Second)
	if n := c.CountWorkflows(`WorkflowType = "ScheduledRun"`); n != 1 {
		t.Fatalf("%d ScheduledRuns after the dry runs and refusals, want only the manual one", n)
	}

	var reports []operator.BackfillProgress
	sent := 0
	res, err := s.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to, Override: pipeline.Schedule{MaxBackfillRuns: 2}, Yes: true,
		Sent:   func(operator.BackfillResult) { sent++ },
		Report: func(p operator.BackfillProgress) { reports = append(reports, p) }, ReportEvery: 100 * time.Millisecond})
	if err != nil || !res.Sent || res.Runs != 3 || sent != 1 || res.Progress == nil {
		t.Fatalf("backfill with --yes: %+v, %v (told sent %d times)", res, err, sent)
	}
	if p := *res.Progress; p != (operator.BackfillProgress{Total: 3, Done: 3, Allocated: 2, Reused: 1}) || len(reports) == 0 || reports[len(reports)-1] != p {
		t.Fatalf("progress %+v (reports %+v), want 3 done: 2 allocated, 1 reused", p, reports)
	}
	// Without a ledger to follow the runs in, a followed backfill is
	// refused before anything is contacted, with the command that sends it
	// unfollowed.
	blind := *s
	blind.Ledger = nil
	if _, err := blind.Backfill(ctx, operator.BackfillInput{Pipeline: "weekly-video", From: from, To: to, Flags: []string{"--via-schedule"}}); allot.ErrorType(err) != allot.NotReady ||
		!strings.Contains(err.Error(), "--via-schedule --no-wait") {
		t.Fatalf("a followed backfill without a ledger: %v, want NotReady naming --no-wait", err)
	}
	// The time on --to never ran; the others did, each once more.
	time.Sleep(2 * time.Second)
	if n := c.CountRuns(keys[3]); n != 0 {
		t.Fatalf("the time on --to (%s) ran %d times: the range is [from, to)", keys[3], n)
	}
	if _, err := c.Ledger.EpisodeByKey(ctx, "weekly-video", keys[3]); !errors.Is(err, ledger.ErrEpisodeNotFound) {
		t.Fatalf("the time on --to has an episode: %v", err)
	}
	runs := c.KeysRun("weekly-video")
	if runs[keys[0]] != 1 || runs[keys[1]] != 2 || runs[keys[2]] != 1 {
		t.Fatalf("runs per key %v", runs)
	}
	if ep, err := c.Ledger.EpisodeByKey(ctx, "weekly-video", keys[1]); err != nil || ep.ID != manual {
		t.Fatalf("the manual run's key: %+v, %v; want episode %s back", ep, err, manual)
	}

	// The same through the real starter: the dry run, the refusal (a JSON
	// error), the progress until the range is processed, and --no-wait.
	bin := allottest.BuildBinary(t, "allot/starter")
	pipelinesFile := allottest.WritePipelines(t, t.TempDir())
	next, end := to.Add(2*time.Hour).Format(time.RFC3339), to.Add(3*time.Hour).Format(time.RFC3339)
	code, out := starterCmd(t, bin, c, pipelinesFile, "schedule", "backfill", "--pipeline", "weekly-video", "--from", to.Format(time.RFC3339), "--to", next, "--dry-run", "--json")
	var dryJSON operator.BackfillResult
	if code != 0 || json.Unmarshal([]byte(out), &dryJSON) != nil || dryJSON.Runs != 2 || dryJSON.Existing == nil || *dryJSON.Existing != 0 || dryJSON.Sent {
		t.Fatalf("starter backfill --dry-run: exit %d\n%s", code, out)
	}
	lowMax := writeFile(t, strings.Replace(string(mustRead(t, pipelinesFile)), "name = \"weekly-video\"", "name = \"weekly-video\"\n  [pipeline.schedule]\n  interval = \"1h\"\n  max_backfill_runs = 1", 1))
	code, out = starterCmd(t, bin, c, lowMax, "schedule", "backfill", "--pipeline", "weekly-video", "--from", to.Format(time.RFC3339), "--to", next, "--json")
	var refusal map[string]string
	if code != 1 || json.Unmarshal([]byte(firstLine(out)), &refusal) != nil || !strings.Contains(refusal["error"], "starts 2 runs") {
		t.Fatalf("starter backfill over max_backfill_runs: exit %d\n%s", code, out)
	}
	// The refusal prints the command that sends it with consent: run it as
	// printed.
	printed := regexp.MustCompile("`(starter schedule backfill [^`]* --yes)`").FindStringSubmatch(refusal["error"])
	if printed == nil {
		t.Fatalf("the refusal prints no command to send it with --yes: %s", refusal["error"])
	}
	code, out = starterCmd(t, bin, c, lowMax, append(allottest.SplitCommand(t, printed[1])[1:], "--progress-interval", "200ms")...)
	if code != 0 || !strings.Contains(out, "0/2 done") && !strings.Contains(out, "1/2 done") || !strings.Contains(out, "2/2 done, processed: 2 allocated, 0 reused") {
		t.Fatalf("starter backfill --yes: exit %d\n%s", code, out)
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, "schedule", "backfill", "--pipeline", "weekly-video", "--from", next, "--to", end, "--no-wait")
	if code != 0 || !strings.Contains(out, "not followed (--no-wait)") || strings.Contains(out, "done:") {
		t.Fatalf("starter backfill --no-wait: exit %d\n%s", code, out)
	}
	// Through the Schedule, on a ledger the worker never created: followed,
	// it is refused, and the command it prints sends it unfollowed.
	later := to.Add(4 * time.Hour).Format(time.RFC3339)
	missing := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	code, out = starterCmd(t, bin, c, pipelinesFile, "schedule", "backfill", "--pipeline", "weekly-video", "--from", end, "--to", later, "--via-schedule", "--ledger", missing)
	printed = regexp.MustCompile("`(starter schedule backfill [^`]* --no-wait)`").FindStringSubmatch(out)
	if code != 1 || printed == nil || !strings.Contains(printed[1], "--ledger "+missing) {
		t.Fatalf("starter backfill --via-schedule without a ledger: exit %d, want 1 and the command with --no-wait\n%s", code, out)
	}
	code, out = starterCmd(t, bin, c, pipelinesFile, allottest.SplitCommand(t, printed[1])[1:]...)
	if code != 0 || !strings.Contains(out, "backfill of weekly-video/schedule") || !strings.Contains(out, "not followed (--no-wait)") {
		t.Fatalf("the printed command %s: exit %d\n%s", printed[1], code, out)
	}
	c.MustCheck()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
