package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/internal/deadline"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// The DeadlineWatch in virtual time, over the real activities, a real
// SQLite ledger and a deadline.Watcher whose Temporal sources are fakes:
// each case sets up the ledger with its own API and asserts the records
// the ledger holds.

const watchPipelines = `
[[pipeline]]
name = "weekly"
period = "iso-week"
time_zone = "UTC"
deadline = "%s"
warn_before = "2h"
  [[pipeline.step]]
  name = "s"
  kind = "paid"
`

// noDeadlinePipelines is the file after the deadline was removed.
const noDeadlinePipelines = `
[[pipeline]]
name = "weekly"
period = "iso-week"
time_zone = "UTC"
  [[pipeline.step]]
  name = "s"
  kind = "paid"
`

// 2026-W32 starts Monday 2026-08-03; "4d9h" is due Friday 2026-08-07
// 09:00 UTC, and warn_before 2h warns at 07:00.
var (
	w32Tuesday = time.Date(2026, 8, 4, 10, 0, 0, 0, time.UTC)
	w32Warn    = time.Date(2026, 8, 7, 7, 0, 0, 0, time.UTC)
	w32Due     = time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)
)

func watchSet(t *testing.T, file string) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(file), "deadline_watch_test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func deadlineSet(t *testing.T, offset string) *pipeline.Set {
	return watchSet(t, fmt.Sprintf(watchPipelines, offset))
}

// fakeTemporal answers the watcher's questions to Temporal.
type fakeTemporal struct {
	mu       sync.Mutex
	schedule deadline.Schedule
	unpicked []deadline.UnpickedRun
	// episodes are what each episode's workflow says, by episode ID.
	episodes map[string]deadline.Episode
}

func (f *fakeTemporal) sources() deadline.Sources {
	return deadline.Sources{
		Schedule: func(context.Context, string) (deadline.Schedule, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.schedule, nil
		},
		Unpicked: func(context.Context, string, string) ([]deadline.UnpickedRun, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.unpicked, nil
		},
		Episode: func(_ context.Context, _ string, ep deadline.Episode) (deadline.Episode, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			wf := f.episodes[ep.ID]
			ep.Remedies, ep.Vendor, ep.NoWorker = wf.Remedies, wf.Vendor, wf.NoWorker
			return ep, nil
		},
	}
}

// watchRun is one DeadlineWatch execution in its own test environment.
type watchRun struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	acts  *activities.Activities
	watch *deadline.Watcher
}

// newWatchRun builds an environment starting at start whose activities
// judge on the environment's clock.
func newWatchRun(t *testing.T, led *ledger.Ledger, set *pipeline.Set, fake *fakeTemporal, start time.Time) *watchRun {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	w := &deadline.Watcher{Ledger: led, Pipelines: set, Sources: fake.sources(), Now: env.Now}
	acts := &activities.Activities{Ledger: led, Pipelines: set, Deadlines: w}
	env.RegisterWorkflow(DeadlineWatch)
	env.RegisterActivity(acts)
	env.SetStartWorkflowOptions(startOptions(allot.DeadlineWatchID("weekly")))
	return &watchRun{t: t, env: env, acts: acts, watch: w}
}

// until runs the watch from after until the environment's clock reaches
// stop, when the test cancels it (the watch never ends by itself while
// its pipeline declares a deadline).
func (r *watchRun) until(stop time.Time, after time.Time) {
	r.t.Helper()
	r.env.RegisterDelayedCallback(r.env.CancelWorkflow, stop.Sub(r.env.Now()))
	r.env.ExecuteWorkflow(DeadlineWatch, DeadlineWatchInput{Pipeline: "weekly", After: after, LedgerID: r.acts.Ledger.ID()})
	if !r.env.IsWorkflowCompleted() {
		r.t.Fatal("the watch did not end")
	}
	if err := r.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		r.t.Fatalf("the watch ended with %v, want it canceled by the test", err)
	}
}

func records(t *testing.T, led *ledger.Ledger) []ledger.DeadlineRecord {
	t.Helper()
	recs, err := led.DeadlineRecords(context.Background(), ledger.DeadlineFilter{Pipeline: "weekly"})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func recordOf(t *testing.T, recs []ledger.DeadlineRecord, period string, kind allot.DeadlineKind) ledger.DeadlineRecord {
	t.Helper()
	var found []ledger.DeadlineRecord
	for _, r := range recs {
		if r.Period == period && r.Kind == kind {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s records of %s, want 1; records: %+v", len(found), kind, period, recs)
	}
	return found[0]
}

// Each cause is named at the warning and at the deadline, with its
// episode and the command that moves it on.
func TestDeadlineWatchNamesEachCause(t *testing.T) {
	ctx := context.Background()
	w32Monday := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	remedies := []string{allot.BudgetRaiseCommand("video-weekly", "2026-W32", 100000, "the week's video"), allot.ShowCommand("weekly", "2026-W32-0")}
	cases := []struct {
		name string
		// setup writes the period's ledger and what Temporal says.
		setup   func(l *ledgertest.Ledger, f *fakeTemporal)
		cause   allot.LateCause
		episode string
		command string
		detail  string // a part of the detail
	}{
		{"schedule paused", func(_ *ledgertest.Ledger, f *fakeTemporal) {
			f.schedule = deadline.Schedule{Exists: true, Paused: true, Note: "vendor migration until Monday"}
		}, allot.CauseSchedulePaused, "", allot.ScheduleUnpauseCommand("weekly"), "vendor migration until Monday"},
		{"no worker", func(_ *ledgertest.Ledger, f *fakeTemporal) {
			f.schedule = deadline.Schedule{Exists: true}
			f.unpicked = []deadline.UnpickedRun{{WorkflowID: allot.AllocationKey("weekly", w32Monday), TaskQueue: "allot-video"}}
		}, allot.CauseNoWorker, "", allot.StartWorkerCommand("allot-video"), "no worker polls task queue allot-video"},
		{"skipped by catch-up", func(l *ledgertest.Ledger, f *fakeTemporal) {
			f.schedule = deadline.Schedule{Exists: true}
			if _, err := l.Led.RecordRunOutcome(ctx, ledger.RunOutcome{Pipeline: "weekly", AllocationKey: allot.AllocationKey("weekly", w32Monday), RunID: "r1",
				NominalTime: w32Monday, Outcome: allot.OutcomeSkipped, Reason: allot.ReasonMissedCatchUp, Period: "2026-W32", Sequence: -1}); err != nil {
				t.Fatal(err)
			}
		}, allot.CauseSkippedCatchUp, "", allot.BackfillCommand("weekly", w32Monday, w32Monday.Add(time.Second)), "catch-up policy skipped"},
		{"no run, no schedule", func(*ledgertest.Ledger, *fakeTemporal) {}, allot.CauseNoRun, "", allot.RunCommand("weekly", time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)), "no Schedule"},
		{"parked on its budget", func(l *ledgertest.Ledger, f *fakeTemporal) {
			ep := l.Allocate("weekly", w32Monday)
			if err := l.Led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeNeedsAttention, allot.BudgetExhausted, w32Monday); err != nil {
				t.Fatal(err)
			}
			f.episodes = map[string]deadline.Episode{ep.ID: {Remedies: remedies}}
		}, allot.CauseParked, "2026-W32-0", remedies[0], allot.BudgetExhausted},
		{"parked on an unknown outcome", func(l *ledgertest.Ledger, f *fakeTemporal) {
			ep := l.Allocate("weekly", w32Monday)
			if err := l.Led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeNeedsAttention, allot.OutcomeUnknown, w32Monday); err != nil {
				t.Fatal(err)
			}
			f.episodes = map[string]deadline.Episode{ep.ID: {Remedies: []string{allot.LookupCommand("weekly", ep.ID, "render")}}}
		}, allot.CauseParked, "2026-W32-0", allot.LookupCommand("weekly", "2026-W32-0", "render"), allot.OutcomeUnknown},
		{"waiting for approval", func(l *ledgertest.Ledger, _ *fakeTemporal) {
			ep := l.Allocate("weekly", w32Monday)
			if err := l.Led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeWaitingApproval, "", w32Monday); err != nil {
				t.Fatal(err)
			}
		}, allot.CauseWaitingApproval, "2026-W32-0", allot.ApproveCommand("weekly", "2026-W32-0"), "waits for approval"},
		{"waiting for a paused vendor", func(l *ledgertest.Ledger, f *fakeTemporal) {
			ep := l.Allocate("weekly", w32Monday)
			if err := l.Led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeWaitingVendor, allot.ReasonVendorPaused, w32Monday); err != nil {
				t.Fatal(err)
			}
			f.episodes = map[string]deadline.Episode{ep.ID: {Vendor: "render-farm"}}
		}, allot.CauseWaitingVendor, "2026-W32-0", allot.VendorResumeCommand("render-farm"), "waits for vendor render-farm"},
		{"failed", func(l *ledgertest.Ledger, _ *fakeTemporal) {
			ep := l.Allocate("weekly", w32Monday)
			if err := l.Led.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeFailed, allot.StepFailure, w32Monday); err != nil {
				t.Fatal(err)
			}
		}, allot.CauseFailed, "2026-W32-0", allot.ShowCommand("weekly", "2026-W32-0"), allot.StepFailure},
		{"still running", func(l *ledgertest.Ledger, _ *fakeTemporal) {
			l.Allocate("weekly", w32Monday)
		}, allot.CauseRunning, "2026-W32-0", allot.ShowCommand("weekly", "2026-W32-0"), "is still"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := ledgertest.New(t)
			fake := &fakeTemporal{}
			c.setup(l, fake)
			newWatchRun(t, l.Led, deadlineSet(t, "4d9h"), fake, w32Tuesday).until(w32Due.Add(time.Hour), time.Time{})
			recs := records(t, l.Led)
			if len(recs) != 2 {
				t.Fatalf("records %+v, want a warning and a late record of 2026-W32", recs)
			}
			for _, kind := range []allot.DeadlineKind{allot.DeadlineWarning, allot.DeadlineLate} {
				r := recordOf(t, recs, "2026-W32", kind)
				if r.Cause != c.cause || r.EpisodeID != c.episode || r.Command != c.command || !strings.Contains(r.Detail, c.detail) {
					t.Errorf("%s: cause %q episode %q command %q detail %q; want %q, %q, %q and a detail with %q",
						kind, r.Cause, r.EpisodeID, r.Command, r.Detail, c.cause, c.episode, c.command, c.detail)
				}
				if !r.DueAt.Equal(w32Due) || r.Needed != 1 || r.Completed != 0 {
					t.Errorf("%s: due %s, needed %d, completed %d; want due %s, 1 needed, 0 completed", kind, r.DueAt, r.Needed, r.Completed, w32Due)
				}
			}
		})
	}
}

// A period that has its completed episode by the deadline is on time,
// and gets no warning.
func TestDeadlineWatchOnTime(t *testing.T) {
	l := ledgertest.New(t)
	ep := l.Allocate("weekly", time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	if _, err := l.Led.CompleteEpisode(context.Background(), "weekly", ep.ID, w32Tuesday); err != nil {
		t.Fatal(err)
	}
	newWatchRun(t, l.Led, deadlineSet(t, "4d9h"), &fakeTemporal{}, w32Tuesday).until(w32Due.Add(time.Hour), time.Time{})
	recs := records(t, l.Led)
	if len(recs) != 1 {
		t.Fatalf("records %+v, want only on_time", recs)
	}
	if r := recordOf(t, recs, "2026-W32", allot.DeadlineOnTime); r.Cause != "" || r.Completed != 1 || !r.DueAt.Equal(w32Due) {
		t.Errorf("on_time record %+v: want no cause, 1 completed, due %s", r, w32Due)
	}
}

// The warning is written at warn_before the deadline, and the late record
// at the deadline, not before; an episode that completes after the
// deadline records when, and how late.
func TestDeadlineWatchWarnsThenLateThenCompletedLate(t *testing.T) {
	l := ledgertest.New(t)
	ep := l.Allocate("weekly", time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	r := newWatchRun(t, l.Led, deadlineSet(t, "4d9h"), &fakeTemporal{}, w32Tuesday)
	var beforeWarn, betweenWarnAndDue []ledger.DeadlineRecord
	r.env.RegisterDelayedCallback(func() { beforeWarn = records(t, l.Led) }, w32Warn.Add(-time.Minute).Sub(w32Tuesday))
	r.env.RegisterDelayedCallback(func() { betweenWarnAndDue = records(t, l.Led) }, w32Due.Add(-time.Minute).Sub(w32Tuesday))
	completed := w32Due.Add(3*time.Hour + 20*time.Minute)
	r.env.RegisterDelayedCallback(func() {
		if _, err := l.Led.CompleteEpisode(context.Background(), "weekly", ep.ID, r.env.Now()); err != nil {
			t.Error(err)
		}
	}, completed.Sub(w32Tuesday))
	r.until(completed.Add(time.Hour), time.Time{})

	if len(beforeWarn) != 0 {
		t.Errorf("before the warning time the ledger had %+v, want nothing", beforeWarn)
	}
	if len(betweenWarnAndDue) != 1 || betweenWarnAndDue[0].Kind != allot.DeadlineWarning || !betweenWarnAndDue[0].RecordedAt.Equal(w32Warn) {
		t.Errorf("between the warning and the deadline the ledger had %+v, want one warning recorded at %s", betweenWarnAndDue, w32Warn)
	}
	recs := records(t, l.Led)
	if len(recs) != 3 {
		t.Fatalf("records %+v, want warning, late, completed_late", recs)
	}
	if late := recordOf(t, recs, "2026-W32", allot.DeadlineLate); !late.RecordedAt.Equal(w32Due) || late.Cause != allot.CauseRunning {
		t.Errorf("late record %+v: want recorded at %s, cause running", late, w32Due)
	}
	done := recordOf(t, recs, "2026-W32", allot.DeadlineCompletedLate)
	if !done.CompletedAt.Equal(completed) || done.LateBy != 3*time.Hour+20*time.Minute || done.Completed != 1 {
		t.Errorf("completed_late record %+v: want completed at %s, late by 3h20m", done, completed)
	}
}

// Watches killed and started again over the same period, and judgements
// asked again, leave one record per (period, kind).
func TestDeadlineWatchRecordsOnceUnderRestarts(t *testing.T) {
	l := ledgertest.New(t)
	set := deadlineSet(t, "4d9h")
	fake := &fakeTemporal{schedule: deadline.Schedule{Exists: true, Paused: true, Note: "holiday"}}
	// Killed after the warning, before the deadline; started again after
	// the warning time (it judges the warning again, at once); started
	// again after the deadline; started from Tuesday again.
	newWatchRun(t, l.Led, set, fake, w32Tuesday).until(w32Warn.Add(time.Minute), time.Time{})
	newWatchRun(t, l.Led, set, fake, w32Warn.Add(30*time.Minute)).until(w32Due.Add(time.Minute), time.Time{})
	newWatchRun(t, l.Led, set, fake, w32Due.Add(2*time.Minute)).until(w32Due.Add(time.Hour), time.Time{})
	r := newWatchRun(t, l.Led, set, fake, w32Tuesday)
	r.until(w32Due.Add(time.Hour), time.Time{})
	for _, kind := range []allot.DeadlineKind{allot.DeadlineWarning, allot.DeadlineLate} {
		res, err := r.acts.JudgeDeadline(context.Background(), deadline.JudgeInput{Pipeline: "weekly", Period: "2026-W32", Kind: kind, DueAt: w32Due})
		if err != nil || !res.Found || res.Recorded || res.Record.Kind != kind {
			t.Errorf("judging %s again: %+v, %v; want the stored record, not recorded again", kind, res, err)
		}
	}
	recs := records(t, l.Led)
	if len(recs) != 2 {
		t.Fatalf("records %+v, want one warning and one late", recs)
	}
	recordOf(t, recs, "2026-W32", allot.DeadlineWarning)
	recordOf(t, recs, "2026-W32", allot.DeadlineLate)
}

// A deadline declared after a period's deadline does not judge that
// period; a worker that was down judges every deadline passed since the
// declaration in turn, at once.
func TestDeadlineWatchIsNotRetroactive(t *testing.T) {
	l := ledgertest.New(t)
	set := deadlineSet(t, "4d9h")
	p, err := set.Get("weekly")
	if err != nil {
		t.Fatal(err)
	}
	// Declared on Saturday of W32, after its deadline; the watch first
	// runs on Tuesday of W34.
	if _, err := l.Led.DeclareDeadline(context.Background(), "weekly", p.DeadlineSpec(), time.Date(2026, 8, 8, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	w34Tuesday := time.Date(2026, 8, 18, 10, 0, 0, 0, time.UTC)
	newWatchRun(t, l.Led, set, &fakeTemporal{}, w34Tuesday).until(time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC), time.Time{})
	recs := records(t, l.Led)
	periods := map[string]int{}
	for _, r := range recs {
		periods[r.Period]++
	}
	if len(periods) != 2 || periods["2026-W33"] != 2 || periods["2026-W34"] != 2 {
		t.Fatalf("records by period %v, want a warning and a late record for 2026-W33 and 2026-W34 and none for 2026-W32: %+v", periods, recs)
	}
	if r := recordOf(t, recs, "2026-W33", allot.DeadlineLate); !r.RecordedAt.Equal(w34Tuesday) || r.Cause != allot.CauseNoRun {
		t.Errorf("2026-W33 late %+v: want it judged at once when the watch started (%s), cause no_run", r, w34Tuesday)
	}
}

// A changed deadline, declared and signalled mid-wait, applies from the
// next deadline on: the period already judged keeps its record, and the
// next is judged at the new deadline, not the old one.
func TestDeadlineWatchReplansOnSignal(t *testing.T) {
	l := ledgertest.New(t)
	r := newWatchRun(t, l.Led, deadlineSet(t, "4d9h"), &fakeTemporal{}, w32Tuesday)
	// Saturday of W32: a worker starts with "3d18h" (Thursday 18:00),
	// declares it and signals the watch, which waits for W33's warning
	// under the old deadline (Friday 07:00).
	changed := time.Date(2026, 8, 8, 12, 0, 0, 0, time.UTC)
	newSet := deadlineSet(t, "3d18h")
	r.env.RegisterDelayedCallback(func() {
		p, err := newSet.Get("weekly")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := l.Led.DeclareDeadline(context.Background(), "weekly", p.DeadlineSpec(), r.env.Now()); err != nil {
			t.Error(err)
		}
		r.watch.Pipelines = newSet
		r.env.SignalWorkflow(DeadlineReplanSignal, nil)
	}, changed.Sub(w32Tuesday))
	w33NewDue := time.Date(2026, 8, 13, 18, 0, 0, 0, time.UTC)
	var state DeadlineState
	r.env.RegisterDelayedCallback(func() {
		v, err := r.env.QueryWorkflow(DeadlineStateQuery)
		if err == nil {
			err = v.Get(&state)
		}
		if err != nil {
			t.Error(err)
		}
	}, changed.Add(time.Hour).Sub(w32Tuesday))
	r.until(w33NewDue.Add(time.Hour), time.Time{})

	recs := records(t, l.Led)
	if late := recordOf(t, recs, "2026-W32", allot.DeadlineLate); !late.DueAt.Equal(w32Due) {
		t.Errorf("2026-W32 late due %s, want the old deadline %s", late.DueAt, w32Due)
	}
	if late := recordOf(t, recs, "2026-W33", allot.DeadlineLate); !late.DueAt.Equal(w33NewDue) || !late.RecordedAt.Equal(w33NewDue) {
		t.Errorf("2026-W33 late due %s recorded %s, want both at the new deadline %s", late.DueAt, late.RecordedAt, w33NewDue)
	}
	if state.Period != "2026-W33" || !state.DueAt.Equal(w33NewDue) || state.LastPeriod != "2026-W32" || state.LastKind != allot.DeadlineLate ||
		state.LastCause != allot.CauseNoRun || state.Judged != 1 {
		t.Errorf("state after the replan %+v: want W33 due %s, last W32 late no_run, 1 judged", state, w33NewDue)
	}
}

// The watch ends when its pipeline declares no deadline any more, or is
// gone from the file, and judges nothing.
func TestDeadlineWatchEndsWithoutADeadline(t *testing.T) {
	for name, file := range map[string]string{
		"deadline removed": noDeadlinePipelines,
		"pipeline removed": strings.ReplaceAll(noDeadlinePipelines, `"weekly"`, `"daily"`),
	} {
		t.Run(name, func(t *testing.T) {
			l := ledgertest.New(t)
			if _, err := l.Led.DeclareDeadline(context.Background(), "weekly", "deadline=4d9h0s episodes=1 period=iso-week zone=UTC", w32Tuesday.Add(-24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			r := newWatchRun(t, l.Led, watchSet(t, file), &fakeTemporal{}, w32Tuesday)
			r.env.ExecuteWorkflow(DeadlineWatch, DeadlineWatchInput{Pipeline: "weekly"})
			var res DeadlineWatchResult
			if err := r.env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Pipeline != "weekly" || res.Judged != 0 {
				t.Errorf("result %+v", res)
			}
			if recs := records(t, l.Led); len(recs) != 0 {
				t.Errorf("records %+v, want none", recs)
			}
		})
	}
}

// A watch judges a bounded number of deadlines per run, then continues as
// new from the last one it judged.
func TestDeadlineWatchContinuesAsNew(t *testing.T) {
	l := ledgertest.New(t)
	// A watch started long after its declaration judges every passed
	// deadline at once: 100 weeks of them.
	set := deadlineSet(t, "4d9h")
	p, err := set.Get("weekly")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Led.DeclareDeadline(context.Background(), "weekly", p.DeadlineSpec(), w32Tuesday); err != nil {
		t.Fatal(err)
	}
	r := newWatchRun(t, l.Led, set, &fakeTemporal{}, w32Tuesday.AddDate(0, 0, 7*(deadlineWatchPeriods+3)))
	r.env.ExecuteWorkflow(DeadlineWatch, DeadlineWatchInput{Pipeline: "weekly", LedgerID: l.Led.ID()})
	var can *workflow.ContinueAsNewError
	if err := r.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the watch ended with %v, want it continued as new", err)
	}
	last, err := l.Led.LastJudgedDue(context.Background(), "weekly")
	if err != nil {
		t.Fatal(err)
	}
	var next DeadlineWatchInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Pipeline != "weekly" || !next.After.Equal(last) || !last.Equal(w32Due.AddDate(0, 0, 7*(deadlineWatchPeriods-1))) || next.LedgerID != l.Led.ID() {
		t.Errorf("continued with %+v, last judged %s: want After the %dth deadline judged, and its ledger", next, last, deadlineWatchPeriods)
	}
}

// A watch of another ledger (two allot deployments on one namespace and
// task queue) is refused by this worker's activities, and judges nothing
// into this worker's ledger (design, "Ledger identity").
func TestDeadlineWatchOfAnotherLedgerJudgesNothingHere(t *testing.T) {
	l := ledgertest.New(t)
	r := newWatchRun(t, l.Led, deadlineSet(t, "4d9h"), &fakeTemporal{}, w32Tuesday)
	r.env.ExecuteWorkflow(DeadlineWatch, DeadlineWatchInput{Pipeline: "weekly", LedgerID: "another-ledger"})
	var appErr *temporal.ApplicationError
	if err := r.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != allot.LedgerMismatch {
		t.Fatalf("the watch of another ledger ended with %v, want %s", err, allot.LedgerMismatch)
	}
	if recs := records(t, l.Led); len(recs) != 0 {
		t.Errorf("records %+v written into the wrong ledger", recs)
	}
	if _, found, err := l.Led.DeadlineDeclaration(context.Background(), "weekly"); err != nil || found {
		t.Errorf("declaration found %v (%v): the plan of another ledger's watch declared here", found, err)
	}
}
