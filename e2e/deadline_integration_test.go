package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// deadlineLead is how long after the test starts today's deadline falls:
// time for the dev stack to start, its worker to declare the deadline
// (periods due before the declaration are never judged), and the
// schedule to be created and paused.
const deadlineLead = 30 * time.Second

// A paused schedule makes a period late: the dev stack's own worker
// declares the pipeline's deadline at start and runs its DeadlineWatch,
// which, with no run ever started for the day, records the period late at
// its deadline naming the paused schedule, its note and the unpause
// command, once.
func TestDeadlinePausedScheduleMakesThePeriodLate(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the embedded Temporal server")
	}
	start := time.Now().UTC()
	midnight := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
	due := start.Add(deadlineLead).Truncate(time.Second).Add(time.Second)
	if !due.Before(midnight.AddDate(0, 0, 1)) {
		t.Skip("today's deadline would fall after midnight UTC: run the test again after midnight")
	}
	offset := due.Sub(midnight)
	dir := t.TempDir()
	file := filepath.Join(dir, "pipelines.toml")
	// The day's deadline as its offset from midnight ("13h27m40s"); the
	// Schedule fires at midnight UTC, so never during the test.
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`
[[pipeline]]
name = "daily"
period = "day"
time_zone = "UTC"
deadline = %q
  [pipeline.schedule]
  interval = "24h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`, offset.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := allottest.StartDevWith(t, devstack.Config{DataDir: filepath.Join(dir, "data"), Pipelines: file, Headless: true})
	t.Logf("dev stack ready %s after the test started; deadline %s (%s)", time.Since(start).Round(time.Millisecond), due.Format(time.RFC3339), offset)
	ctx, cancel := allottest.Context(t, 3*time.Minute)
	defer cancel()
	set, err := pipeline.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	c := allottest.DialDev(t, dev.Info)
	s := &operator.Schedules{Client: c, Pipelines: set, TaskQueue: workflows.TaskQueue, Namespace: dev.Info.Namespace}
	if _, err := s.Create(ctx, operator.ScheduleInput{Pipeline: "daily"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pause(ctx, "daily", operator.ScheduleNote{By: "ops", Text: "vendor migration"}); err != nil {
		t.Fatal(err)
	}
	led, err := ledger.OpenReadOnly(ctx, dev.Info.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if d, found, err := led.DeadlineDeclaration(ctx, "daily"); err != nil || !found || !d.DeclaredAt.Before(due) {
		// Declared after the deadline: the period is rightly not judged.
		t.Fatalf("declaration %+v, %v, %v: want it declared before the deadline %s; the dev stack took %s to start, over the %s this test allows: run it on a less busy machine",
			d, found, err, due.Format(time.RFC3339), time.Since(start).Round(time.Second), deadlineLead)
	}

	period := due.Format("2006-01-02")
	lateRecords := func() []ledger.DeadlineRecord {
		recs, err := led.DeadlineRecords(ctx, ledger.DeadlineFilter{Pipeline: "daily", Kind: allot.DeadlineLate})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	var recs []ledger.DeadlineRecord
	for wait := allottest.Deadline(t, time.Until(due)+30*time.Second); ; {
		if recs = lateRecords(); len(recs) > 0 {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("no late record of %s by %s (due %s)", period, time.Now().UTC().Format(time.RFC3339), due.Format(time.RFC3339))
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := recs[0]
	if r.Period != period || r.Cause != allot.CauseSchedulePaused || !strings.Contains(r.Detail, "vendor migration") ||
		r.Command != allot.ScheduleUnpauseCommand("daily") || !r.DueAt.Equal(due) || r.RecordedAt.Before(due) {
		t.Fatalf("late record %+v: want period %s due %s, cause schedule_paused with the note, command %q", r, period, due, allot.ScheduleUnpauseCommand("daily"))
	}
	// Once the watch has moved on to the next day, the day has one late
	// record and nothing else.
	for wait := allottest.Deadline(t, 30*time.Second); ; {
		var st workflows.DeadlineState
		v, err := c.QueryWorkflow(ctx, allot.DeadlineWatchID("daily"), "", workflows.DeadlineStateQuery)
		if err == nil {
			err = v.Get(&st)
		}
		if err == nil && st.Period == due.AddDate(0, 0, 1).Format("2006-01-02") && st.LastPeriod == period && st.LastKind == allot.DeadlineLate {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("the watch did not move on to the next day: state %+v, %v", st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	all, err := led.DeadlineRecords(ctx, ledger.DeadlineFilter{Pipeline: "daily"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("deadline records %+v, want only the late one", all)
	}
}
