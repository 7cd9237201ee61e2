package report

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

const deadlinePipelines = `
[[pipeline]]
name = "weekly"
time_zone = "Europe/Berlin"
deadline = "4d9h"
warn_before = "24h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[pipeline]]
name = "daily"
period = "day"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// plantDeadlines writes, through the ledger's own judgement, five weeks of
// "weekly" (Friday 09:00 in Berlin): W44 late with no run (open), W45 on
// time, W47 late with the schedule paused (open), W48 warned, late and
// completed two hours after its deadline, W49 on time.
func plantDeadlines(t *testing.T, l *testLedger) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(deadlinePipelines), "deadlines_test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("weekly")
	ctx := context.Background()
	judge := func(period string, kind allot.DeadlineKind, cause allot.LateCause, detail, episode, command string) {
		t.Helper()
		due, warn, err := p.Due(period)
		if err != nil {
			t.Fatal(err)
		}
		at := due
		if kind == allot.DeadlineWarning {
			at = warn
		}
		if _, _, _, err := l.led.JudgePeriod(ctx, ledger.PeriodJudgement{Pipeline: "weekly", Period: period, Kind: kind, DueAt: due, Needed: 1,
			Cause: cause, Detail: detail, EpisodeID: episode, Command: command, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(nominal time.Time, at time.Time) ledger.Episode {
		t.Helper()
		ep := l.Allocate("weekly", nominal)
		if _, err := l.led.CompleteEpisode(ctx, "weekly", ep.ID, at); err != nil {
			t.Fatal(err)
		}
		return ep
	}
	judge("2026-W44", allot.DeadlineLate, allot.CauseNoRun, "the pipeline has no Schedule", "", allot.RunCommand("weekly", time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)))
	complete(time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC))
	judge("2026-W45", allot.DeadlineLate, "", "", "", "")
	judge("2026-W47", allot.DeadlineLate, allot.CauseSchedulePaused, "paused for the migration", "", allot.ScheduleUnpauseCommand("weekly"))
	w48 := l.Allocate("weekly", time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	judge("2026-W48", allot.DeadlineWarning, allot.CauseParked, "BudgetExhausted", w48.ID, allot.ShowCommand("weekly", w48.ID))
	judge("2026-W48", allot.DeadlineLate, allot.CauseParked, "BudgetExhausted", w48.ID, allot.ShowCommand("weekly", w48.ID))
	if _, err := l.led.CompleteEpisode(ctx, "weekly", w48.ID, time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	complete(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	judge("2026-W49", allot.DeadlineLate, "", "", "", "")
	return set
}

// runs' deadline records: every record of the pipeline, in the order
// written, its times in the pipeline's zone (Friday 09:00 reads 09:00), a
// completed_late saying when and by how much; --since keeps the later
// deadlines; a pipeline without a deadline or records shows nothing.
func TestDeadlinesListsThePipelinesRecordsInItsZone(t *testing.T) {
	l := newTestLedger(t)
	set := plantDeadlines(t, l)
	ctx := context.Background()
	res, err := Deadlines(ctx, l.led, DeadlinesInput{Pipeline: "weekly", Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Records {
		got = append(got, r.Period+" "+string(r.Kind)+" "+r.DueAt.Format(time.RFC3339)+" "+string(r.Cause))
	}
	want := []string{
		"2026-W44 late 2026-10-30T09:00:00+01:00 no_run",
		"2026-W45 on_time 2026-11-06T09:00:00+01:00 ",
		"2026-W47 late 2026-11-20T09:00:00+01:00 schedule_paused",
		"2026-W48 warning 2026-11-27T09:00:00+01:00 parked",
		"2026-W48 late 2026-11-27T09:00:00+01:00 parked",
		"2026-W48 completed_late 2026-11-27T09:00:00+01:00 ",
		"2026-W49 on_time 2026-12-04T09:00:00+01:00 ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deadline records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(res.Deadline, "deadline=4d9h0m0s episodes=1 period=iso-week zone=Europe/Berlin") {
		t.Errorf("deadline %q, want the file's spec", res.Deadline)
	}
	done := res.Records[5]
	if done.LateBy != 2*time.Hour || done.CompletedAt.Format(time.RFC3339) != "2026-11-27T11:00:00+01:00" || done.Completed != 1 || done.Needed != 1 {
		t.Errorf("completed_late %+v: want completed 11:00 Berlin, 2h late, 1/1", done)
	}
	if late := res.Records[4]; late.EpisodeID == "" || late.Command != allot.ShowCommand("weekly", late.EpisodeID) || late.Detail != "BudgetExhausted" {
		t.Errorf("late record %+v: want its episode, detail and command", late)
	}

	since, err := Deadlines(ctx, l.led, DeadlinesInput{Pipeline: "weekly", Pipelines: set, Since: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)})
	if err != nil || len(since.Records) != 4 {
		t.Fatalf("records due since 2026-11-27: %+v, %v, want the 4 of W48 and W49", since.Records, err)
	}
	none, err := Deadlines(ctx, l.led, DeadlinesInput{Pipeline: "daily", Pipelines: set})
	if err != nil || none.Shown() {
		t.Fatalf("a pipeline without a deadline or records: %+v, %v, want nothing to show", none, err)
	}
}

// stats: judged, on time, late and completed late per month of the
// deadline, with the ratio as counts and a whole percent; the late periods
// not completed since listed with their command.
func TestStatsCountsPeriodsOnTimePerMonth(t *testing.T) {
	l := newTestLedger(t)
	set := plantDeadlines(t, l)
	res, err := Stats(context.Background(), l.led, StatsInput{Pipeline: "weekly", Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	want := []OnTimeMonth{
		{Month: "2026-10", Judged: 1, OnTime: 0, Late: 1, Ratio: "0/1 on time", Percent: "0%"},
		{Month: "2026-11", Judged: 3, OnTime: 1, Late: 2, CompletedLate: 1, Ratio: "1/3 on time", Percent: "33%"},
		{Month: "2026-12", Judged: 1, OnTime: 1, Ratio: "1/1 on time", Percent: "100%"},
	}
	if !reflect.DeepEqual(res.OnTime, want) {
		t.Errorf("on time per month:\n%+v\nwant\n%+v", res.OnTime, want)
	}
	var open []string
	for _, r := range res.LateOpen {
		open = append(open, r.Period+" "+r.Command)
	}
	if want := []string{"2026-W44 " + allot.RunCommand("weekly", time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)), "2026-W47 " + allot.ScheduleUnpauseCommand("weekly")}; !reflect.DeepEqual(open, want) {
		t.Errorf("late periods open: %q, want %q", open, want)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"ratio":"1/3 on time","percent":"33%"`) {
		t.Errorf("stats JSON lacks the ratio as text: %s", b)
	}
	daily, err := Stats(context.Background(), l.led, StatsInput{Pipeline: "daily", Pipelines: set})
	if err != nil || daily.OnTime == nil || len(daily.OnTime) != 0 || daily.LateOpen == nil || len(daily.LateOpen) != 0 {
		t.Fatalf("stats of a pipeline without a deadline: %+v, %+v, %v: want empty lists", daily.OnTime, daily.LateOpen, err)
	}
}

// check reports each late period not completed since as period_late, with
// its period, cause and detail, and the complete command its record
// stores as the fix; a period completed late, or another pipeline's, is
// not reported.
func TestCheckReportsLatePeriodsNotCompletedSince(t *testing.T) {
	l := newTestLedger(t)
	set := plantDeadlines(t, l)
	ctx := context.Background()
	res, err := Audit(ctx, l.led, CheckInput{Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	var late []ledger.Violation
	for _, v := range res.Violations {
		if v.Kind == KindPeriodLate {
			late = append(late, v)
		}
	}
	if len(late) != 2 || res.OK {
		t.Fatalf("period_late violations %+v (ok %v): want W44 and W47, not ok", late, res.OK)
	}
	want := []ledger.Violation{
		{Kind: KindPeriodLate, Pipeline: "weekly",
			Detail: "period 2026-W44 was due 2026-10-30T09:00:00+01:00 with 0 of 1 completed episodes: no_run (the pipeline has no Schedule)",
			Fix:    allot.RunCommand("weekly", time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC))},
		{Kind: KindPeriodLate, Pipeline: "weekly",
			Detail: "period 2026-W47 was due 2026-11-20T09:00:00+01:00 with 0 of 1 completed episodes: schedule_paused (paused for the migration)",
			Fix:    allot.ScheduleUnpauseCommand("weekly")},
	}
	if !reflect.DeepEqual(late, want) {
		t.Errorf("period_late violations:\n%+v\nwant\n%+v", late, want)
	}
	other, err := Audit(ctx, l.led, CheckInput{Pipeline: "daily", Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range other.Violations {
		if v.Kind == KindPeriodLate {
			t.Errorf("check --pipeline daily reports %+v of another pipeline", v)
		}
	}
}
