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

const viewPipelines = `
[[pipeline]]
name = "weekly"
stall_after = "30m"
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

func viewSet(t *testing.T) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(viewPipelines), "views_test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// The status column is the outcome: an episode waiting for approval or
// rejected used to show "allocated".
func TestEpisodeStatusMatchesItsOutcome(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	fresh := l.Allocate("weekly", mon)
	waiting := l.Allocate("weekly", mon.Add(time.Hour))
	rejected := l.Allocate("weekly", mon.Add(2*time.Hour))
	done := l.Allocate("weekly", mon.Add(3*time.Hour))
	for ep, outcome := range map[string]allot.Outcome{waiting.ID: allot.OutcomeWaitingApproval, rejected.ID: allot.OutcomeRejected, done.ID: allot.OutcomeCompleted} {
		if err := l.led.RecordEpisodeOutcome(ctx, "weekly", ep, outcome, "", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.led.CompleteEpisode(ctx, "weekly", done.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	res, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Pipelines: viewSet(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{fresh.ID: "allocated", waiting.ID: "waiting_approval", rejected.ID: "rejected", done.ID: "completed"}
	for _, e := range res.Episodes {
		if e.Status != want[e.ID] {
			t.Errorf("episode %s: status %q, want %q (outcome %q)", e.ID, e.Status, want[e.ID], e.Outcome)
		}
	}
	// JSON has the one status too.
	data, _ := json.Marshal(res)
	if !strings.Contains(string(data), `"status":"waiting_approval"`) || !strings.Contains(string(data), `"status":"rejected"`) || strings.Count(string(data), `"status":"allocated"`) != 1 {
		t.Fatalf("episodes JSON %s", data)
	}
	show, err := Show(ctx, l.led, nil, "weekly", rejected.ID)
	if err != nil || show.Episode.Status != "rejected" {
		t.Fatalf("show: status %q, %v; want rejected", show.Episode.Status, err)
	}
}

// A misspelt pipeline is refused, naming the known ones; one that exists
// only in the ledger (removed from the file) still answers.
func TestUnknownPipelineIsRefusedButALedgerOnlyPipelineWorks(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	set := viewSet(t)
	l.Allocate("retired", mon)
	l.charge(l.Allocate("weekly", mon), "video", 0, "vt_00000000000000000000000000000001", 250, "USD")
	for name, call := range map[string]func(p string) error{
		"episodes": func(p string) error {
			_, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: p, Pipelines: set})
			return err
		},
		"stats": func(p string) error { _, err := Stats(ctx, l.led, StatsInput{Pipeline: p, Pipelines: set}); return err },
		"costs": func(p string) error { _, err := Costs(ctx, l.led, CostsInput{Pipeline: p, Pipelines: set}); return err },
	} {
		err := call("nosuch")
		if err == nil || !strings.Contains(err.Error(), "daily, retired, weekly") || allot.ErrorType(err) != allot.PipelineNotFound {
			t.Errorf("%s --pipeline nosuch: %v; want PipelineNotFound naming daily, retired, weekly", name, err)
		}
		for _, p := range []string{"retired", "weekly", "daily"} {
			if err := call(p); err != nil {
				t.Errorf("%s --pipeline %s: %v", name, p, err)
			}
		}
	}
	if err := KnownPipeline(ctx, l.led, set, "Not Valid"); err == nil {
		t.Fatal("an invalid name passed")
	}
}

// Stats separates the runs worth a look from a schedule's normal course,
// and reports a step retrying past the pipeline's stall_after as stalled.
func TestStatsReportsStalledEpisodesAndRunsWorthALook(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	now := time.Now().UTC()
	stuck := l.Allocate("weekly", mon)
	slow := l.Allocate("weekly", tue)
	l.Allocate("weekly", nextMon)
	for ep, since := range map[string]time.Time{stuck.ID: now.Add(-45 * time.Minute), slow.ID: now.Add(-10 * time.Minute)} {
		if err := l.led.RecordEpisodeOutcome(ctx, "weekly", ep, allot.OutcomeRetrying, "ConnectionRefused", since); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range []struct {
		outcome allot.Outcome
		reason  string
	}{
		{allot.OutcomeAllocated, allot.ReasonNewEpisode}, {allot.OutcomeReused, allot.ReasonKeyBound},
		{allot.OutcomeSkipped, allot.ReasonCapReached}, {allot.OutcomeSkipped, allot.ReasonNoReadyInput},
		{allot.OutcomeFailed, allot.AllocationKeyCrossesPeriod}, {allot.OutcomeSkipped, "paused_by_hand"},
	} {
		if _, err := l.led.RecordRunOutcome(ctx, ledger.RunOutcome{Pipeline: "weekly", AllocationKey: "weekly/k", RunID: string(rune('a' + i)),
			NominalTime: mon, Outcome: o.outcome, Reason: o.reason, Sequence: -1}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Stats(ctx, l.led, StatsInput{Pipeline: "weekly", Pipelines: viewSet(t), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	wantLook := []ledger.OutcomeCount{
		{Outcome: allot.OutcomeFailed, Reason: allot.AllocationKeyCrossesPeriod, Count: 1},
		{Outcome: allot.OutcomeSkipped, Reason: "paused_by_hand", Count: 1},
	}
	if !reflect.DeepEqual(res.WorthALook, wantLook) || res.RunsTotal != 6 {
		t.Errorf("worth a look %+v (runs %d), want %+v", res.WorthALook, res.RunsTotal, wantLook)
	}
	if res.StallAfter != "30m0s" || len(res.Stalled) != 1 || res.Stalled[0].EpisodeID != stuck.ID || res.Stalled[0].Reason != "ConnectionRefused" {
		t.Fatalf("stalled %+v (after %s), want only %s (45 min > 30 min)", res.Stalled, res.StallAfter, stuck.ID)
	}
	wantEpisodes := []ledger.OutcomeCount{
		{Outcome: allot.OutcomeAllocated, Count: 1},
		{Outcome: allot.OutcomeRetrying, Reason: "ConnectionRefused", Count: 1},
		{Outcome: allot.OutcomeStalled, Reason: "ConnectionRefused", Count: 1},
	}
	if !reflect.DeepEqual(res.Episodes, wantEpisodes) || res.EpisodesTotal != 3 {
		t.Fatalf("episodes %+v (total %d), want %+v", res.Episodes, res.EpisodesTotal, wantEpisodes)
	}
	// With the default stall_after (15 min) on a pipeline only the ledger
	// knows, the same applies; nothing stalled gives an empty list.
	res, err = Stats(ctx, l.led, StatsInput{Pipeline: "weekly", Now: now.Add(-40 * time.Minute)})
	if err != nil || len(res.Stalled) != 0 || res.Stalled == nil || res.StallAfter != "15m0s" {
		t.Fatalf("stats before anything stalled: %+v, %v", res, err)
	}
}
