package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/internal/report"
)

const deadlinePipelineFile = `
[[pipeline]]
name = "weekly"
time_zone = "Europe/Berlin"
deadline = "4d9h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// deadlineLedger writes, in the ledger at url, weekly's 2026-W47 late
// with its schedule paused (still open) and 2026-W48 on time.
func deadlineLedger(t *testing.T, url string) (pipes string) {
	t.Helper()
	pipes = pipelinetest.Write(t, t.TempDir(), deadlinePipelineFile)
	led := ledgertest.Open(t, url)
	ctx := context.Background()
	nominal := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", nominal), Period: "2026-W48", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.CompleteEpisode(ctx, "weekly", res.Episode.ID, nominal); err != nil {
		t.Fatal(err)
	}
	for _, j := range []ledger.PeriodJudgement{
		{Period: "2026-W47", DueAt: time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC), Cause: allot.CauseSchedulePaused, Detail: "paused for the migration", Command: allot.ScheduleUnpauseCommand("weekly")},
		{Period: "2026-W48", DueAt: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)},
	} {
		j.Pipeline, j.Kind, j.Needed, j.At = "weekly", allot.DeadlineLate, 1, j.DueAt
		if _, _, _, err := led.JudgePeriod(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	return pipes
}

// sqliteDeadlineLedger is deadlineLedger on a new SQLite ledger.
func sqliteDeadlineLedger(t *testing.T) (pipes, url string) {
	t.Helper()
	url = "sqlite:" + filepath.Join(t.TempDir(), "allot.db")
	return deadlineLedger(t, url), url
}

// stats prints the on-time ratio per month and the late periods still
// open with their commands, and --json carries both.
func TestStatsPrintsOnTimePerMonthAndLatePeriods(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.driver, func(t *testing.T) { statsPrintsOnTime(t, l.url) })
	}
}

func statsPrintsOnTime(t *testing.T, url string) {
	pipes := deadlineLedger(t, url)
	code, out, errOut := run(t, "stats", "--pipeline", "weekly", "--ledger", url, "--pipelines", pipes)
	if code != exitOK {
		t.Fatalf("stats: exit %d\n%s%s", code, out, errOut)
	}
	for _, re := range []string{
		`(?m)^ON TIME\s+JUDGED\s+ON TIME\s+LATE\s+COMPLETED LATE\s+RATIO$`,
		`(?m)^2026-11\s+2\s+1\s+1\s+0\s+1/2 on time \(50%\)$`,
		`(?m)^LATE \(1\): not completed since their deadline\s+DUE\s+CAUSE\s+COMMAND$`,
		`(?m)^2026-W47\s+2026-11-20T09:00:00\+01:00\s+schedule_paused: paused for the migration\s+` + regexp.QuoteMeta(allot.ScheduleUnpauseCommand("weekly")) + `$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stats lacks %s:\n%s", re, out)
		}
	}
	code, out, errOut = run(t, "stats", "--pipeline", "weekly", "--ledger", url, "--pipelines", pipes, "--json")
	if code != exitOK {
		t.Fatalf("stats --json: exit %d\n%s%s", code, out, errOut)
	}
	var res report.StatsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.OnTime) != 1 || res.OnTime[0].Ratio != "1/2 on time" || res.OnTime[0].Percent != "50%" || len(res.LateOpen) != 1 || res.LateOpen[0].Period != "2026-W47" {
		t.Errorf("stats --json: on time %+v, late %+v", res.OnTime, res.LateOpen)
	}
}

// check lists a late period as period_late with its cause and, as the
// fix, the command its record stores, and exits 3.
func TestCheckReportsALatePeriodWithItsCommand(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.driver, func(t *testing.T) { checkReportsALatePeriod(t, l.url) })
	}
}

func checkReportsALatePeriod(t *testing.T, url string) {
	pipes := deadlineLedger(t, url)
	code, out, errOut := run(t, "check", "--pipeline", "weekly", "--ledger", url, "--pipelines", pipes)
	if code != exitViolations {
		t.Fatalf("check: exit %d, want %d\n%s%s", code, exitViolations, out, errOut)
	}
	for _, re := range []string{
		`(?m)^period_late\s+weekly\s+-\s+period 2026-W47 was due 2026-11-20T09:00:00\+01:00 with 0 of 1 completed episodes: schedule_paused \(paused for the migration\)$`,
		`(?m)^\s+fix:\s+` + regexp.QuoteMeta(allot.ScheduleUnpauseCommand("weekly")) + `$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("check lacks %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "2026-W48") {
		t.Errorf("check reports W48, which was on time:\n%s", out)
	}
}

// runs reads the pipeline's deadline records from the ledger; with no
// ledger there it says so for a pipeline that declares a deadline,
// instead of an empty list that reads as "never late".
func TestRunsReadsDeadlineRecordsOrSaysWhyNot(t *testing.T) {
	pipes, url := sqliteDeadlineLedger(t)
	c := &cli{cfg: app.Config{Ledger: url, Pipelines: pipes}}
	d, err := c.runsDeadlines(context.Background(), report.RunsInput{Pipeline: "weekly"})
	if err != nil || len(d.Records) != 2 || d.Records[0].Kind != allot.DeadlineLate || d.Records[1].Kind != allot.DeadlineOnTime || d.Unread != "" {
		t.Fatalf("runs' deadline records: %+v, %v", d, err)
	}
	missing := &cli{cfg: app.Config{Ledger: "sqlite:" + filepath.Join(t.TempDir(), "none.db"), Pipelines: pipes}}
	d, err = missing.runsDeadlines(context.Background(), report.RunsInput{Pipeline: "weekly"})
	if err != nil || !d.Shown() || !strings.Contains(d.Unread, "start the worker once") || d.Deadline == "" {
		t.Fatalf("runs' deadline records without a ledger: %+v, %v: want the deadline and why no records were read", d, err)
	}
}

// runs prints, after the executions, the deadline and each record: a
// short period with its cause, episode and command, one completed late
// with when and by how much.
func TestRunsPrintsPeriodDeadlines(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 11, 27, 9, 0, 0, 0, berlin)
	res := report.RunsResult{Pipeline: "weekly", Executions: []report.Execution{}, Deadlines: &report.DeadlinesResult{
		Deadline: "deadline=4d9h0m0s episodes=1 period=iso-week zone=Europe/Berlin",
		Records: []ledger.DeadlineRecord{
			{Period: "2026-W48", Kind: allot.DeadlineLate, DueAt: due, Needed: 1, Cause: allot.CauseParked, Detail: "BudgetExhausted",
				EpisodeID: "2026-W48-0", Command: allot.ShowCommand("weekly", "2026-W48-0")},
			{Period: "2026-W48", Kind: allot.DeadlineCompletedLate, DueAt: due, Needed: 1, Completed: 1,
				CompletedAt: due.Add(2 * time.Hour), LateBy: 2 * time.Hour},
		},
	}}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	printRuns(tw, res)
	tw.Flush()
	text := out.String()
	for _, re := range []string{
		`(?m)^0 execution\(s\)$`,
		`(?m)^deadline\s+deadline=4d9h0m0s episodes=1 period=iso-week zone=Europe/Berlin$`,
		`(?m)^PERIOD\s+DUE\s+KIND\s+COMPLETED\s+CAUSE\s+EPISODE\s+COMMAND$`,
		`(?m)^2026-W48\s+2026-11-27T09:00:00\+01:00\s+late\s+0/1\s+parked: BudgetExhausted\s+2026-W48-0\s+` + regexp.QuoteMeta(allot.ShowCommand("weekly", "2026-W48-0")) + `$`,
		`(?m)^2026-W48\s+2026-11-27T09:00:00\+01:00\s+completed_late\s+1/1\s+completed 2026-11-27T11:00:00\+01:00, late by 2h0m0s\s+-\s+-$`,
		`(?m)^2 deadline record\(s\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("runs lacks %s:\n%s", re, text)
		}
	}
	res.Deadlines = nil
	out.Reset()
	printRuns(&out, res)
	if strings.Contains(out.String(), "deadline") {
		t.Errorf("runs of a pipeline without a deadline prints one:\n%s", out.String())
	}
}
