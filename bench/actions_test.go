package bench

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"allot"
	"allot/internal/actioncount"
	"allot/workflows"
)

var updateActions = flag.Bool("update-actions", false,
	"TestSaveActionHistories: run allot's two-step pipeline and the hand-written pair once each on an embedded server and save their histories to "+actionsDir)

// actionsDir holds the saved histories that BenchmarkActionsPerRun counts.
const actionsDir = "testdata/actions"

// saveActionsCommand creates the histories of actionsDir. The flag comes
// after the package: go test ends its package list at the first flag it
// does not know, so `-update-actions ./bench/` would test the root package.
const saveActionsCommand = "go test -run TestSaveActionHistories ./bench/ -update-actions"

// The saved histories of one run of each side.
const (
	allotRunFile     = "allot_scheduled_run.json"
	allotEpisodeFile = "allot_episode.json"
	handParentFile   = "hand_parent.json"
	handChildFile    = "hand_child.json"
)

// TestSaveActionHistories runs allot's run of the two-step pipeline
// (bench-two: a ScheduledRun that allocates and starts its Episode) and the
// hand-written pair of BenchmarkRunVsHandWritten once each, on the same
// embedded stack as that benchmark, and saves their four histories under
// testdata/actions/ for BenchmarkActionsPerRun. Only with -update-actions:
//
//	go test -run TestSaveActionHistories ./bench/ -update-actions
func TestSaveActionHistories(t *testing.T) {
	if !*updateActions {
		t.Skip("saves the histories only with -update-actions: " + saveActionsCommand)
	}
	st := startTemporal(t, defaultStore())
	w := startAllotWorker(t, st)
	hand := startHandWorker(t, st, w)
	clock := newNominalClock(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()

	nominal := clock.take()
	if err := w.runAllotOf(ctx, st.Client, twoStepPipeline, nominal); err != nil {
		t.Fatal(err)
	}
	eps, err := w.Ledger.ListEpisodes(ctx, twoStepPipeline, "")
	if err != nil || len(eps) != 1 {
		t.Fatalf("episodes after one run: %v, %v", eps, err)
	}
	handNominal := clock.take()
	if err := hand.run(ctx, handNominal); err != nil {
		t.Fatal(err)
	}

	if err := os.MkdirAll(actionsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ file, workflowID string }{
		{allotRunFile, allot.AllocationKey(twoStepPipeline, nominal)},
		{allotEpisodeFile, allot.EpisodeWorkflowID(twoStepPipeline, eps[0].ID)},
		{handParentFile, hand.parentID(handNominal)},
		{handChildFile, hand.childID(handNominal)},
	} {
		events := fetchHistory(t, st.Client, h.workflowID)
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(actionsDir, h.file), data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s, %d events, %v", h.file, h.workflowID, len(events), actioncount.Count(events))
	}
}

// fetchHistory returns the events of the latest run of workflowID.
func fetchHistory(tb testing.TB, c client.Client, workflowID string) []*historypb.HistoryEvent {
	tb.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			tb.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

// actionHistories is the four saved histories.
type actionHistories struct {
	allotRun, allotEpisode, handParent, handChild []*historypb.HistoryEvent
}

// loadActionHistories reads the saved histories, and skips when they have
// not been saved yet.
func loadActionHistories(tb testing.TB) actionHistories {
	tb.Helper()
	load := func(file string) []*historypb.HistoryEvent {
		data, err := os.ReadFile(filepath.Join(actionsDir, file))
		if os.IsNotExist(err) {
			tb.Skipf("no saved history %s: save the four with %s", filepath.Join(actionsDir, file), saveActionsCommand)
		}
		if err != nil {
			tb.Fatal(err)
		}
		var h historypb.History
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &h); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		if len(h.GetEvents()) == 0 {
			tb.Fatalf("%s holds no events", file)
		}
		return h.GetEvents()
	}
	return actionHistories{
		allotRun:     load(allotRunFile),
		allotEpisode: load(allotEpisodeFile),
		handParent:   load(handParentFile),
		handChild:    load(handChildFile),
	}
}

// counts returns the actions of allot's run (ScheduledRun and Episode) and
// of the hand-written pair (parent and child).
func (h actionHistories) counts() (allotRun, hand actioncount.Counts) {
	return actioncount.Count(h.allotRun).Add(actioncount.Count(h.allotEpisode)),
		actioncount.Count(h.handParent).Add(actioncount.Count(h.handChild))
}

// BenchmarkActionsPerRun counts what one run of the two-step pipeline costs
// on Temporal Cloud, in billable actions (Temporal Cloud's list of actions,
// applied to the events of a history by internal/actioncount), for allot
// (the ScheduledRun and its Episode) and for the hand-written pair of
// BenchmarkRunVsHandWritten (parent and child), from the histories that
// TestSaveActionHistories saved: it needs no server. It reports
// allot-actions/run, hand-actions/run and ratio-allot/hand, and logs the
// actions of each type on both sides, so that the difference has names.
//
//	go test -run '^$' -bench ActionsPerRun -benchtime 1x ./bench/
func BenchmarkActionsPerRun(b *testing.B) {
	h := loadActionHistories(b)
	var allotRun, hand actioncount.Counts
	for b.Loop() {
		allotRun, hand = h.counts()
	}
	b.ReportMetric(float64(allotRun.Total()), "allot-actions/run")
	b.ReportMetric(float64(hand.Total()), "hand-actions/run")
	b.ReportMetric(float64(allotRun.Total())/float64(hand.Total()), "ratio-allot/hand")
	b.Logf("actions per run by type (%s):", actioncount.DocsURL)
	b.Logf("%-26s %6s %6s", "type", "allot", "hand")
	handTypes := hand.ByType()
	for i, t := range allotRun.ByType() {
		if t.Actions != 0 || handTypes[i].Actions != 0 {
			b.Logf("%-26s %6d %6d", t.Type, t.Actions, handTypes[i].Actions)
		}
	}
	b.Logf("%-26s %6d %6d", "total", allotRun.Total(), hand.Total())
	b.Logf("allot's markers: %v; the hand-written pair's: %v", allotRun.Markers, hand.Markers)
	b.Logf("ScheduledRun: %v", actioncount.Count(h.allotRun))
	b.Logf("Episode:      %v", actioncount.Count(h.allotEpisode))
	b.Logf("hand parent:  %v", actioncount.Count(h.handParent))
	b.Logf("hand child:   %v", actioncount.Count(h.handChild))
}

// TestActionsPerRunOfSavedHistories checks that the saved histories are
// what they say and that their counts are sane: each side starts two
// workflows (a parent and the child it started), intends one child start,
// and the hand-written pair, which records no markers, schedules its three
// activities (allocate, plan, assemble). It asserts no ratio.
func TestActionsPerRunOfSavedHistories(t *testing.T) {
	h := loadActionHistories(t)
	for _, c := range []struct {
		name                  string
		parent, child         []*historypb.HistoryEvent
		parentType, childType string
		parentIDPrefix        string
	}{
		{"allot", h.allotRun, h.allotEpisode, workflows.ScheduledRunWorkflow, workflows.EpisodeWorkflow, allot.ScheduleActionID(twoStepPipeline) + "-"},
		{"hand", h.handParent, h.handChild, handParentWF, handChildWF, "hand/parent/"},
	} {
		ps := c.parent[0].GetWorkflowExecutionStartedEventAttributes()
		cs := c.child[0].GetWorkflowExecutionStartedEventAttributes()
		if ps.GetWorkflowType().GetName() != c.parentType || cs.GetWorkflowType().GetName() != c.childType {
			t.Errorf("%s: saved workflows %q and %q, want %q and %q", c.name, ps.GetWorkflowType().GetName(), cs.GetWorkflowType().GetName(), c.parentType, c.childType)
		}
		if ps.GetParentWorkflowExecution() != nil {
			t.Errorf("%s: the parent %s has a parent of its own: %v", c.name, c.parentType, ps.GetParentWorkflowExecution())
		}
		if id := cs.GetParentWorkflowExecution().GetWorkflowId(); !strings.HasPrefix(id, c.parentIDPrefix) {
			t.Errorf("%s: the child %s names the parent %q, want one of %q...", c.name, c.childType, id, c.parentIDPrefix)
		}
		parent, child := actioncount.Count(c.parent), actioncount.Count(c.child)
		sum := parent.Add(child)
		if sum.WorkflowStarted != 2 {
			t.Errorf("%s: %d workflow starts, want 2 (the parent and its child): %v", c.name, sum.WorkflowStarted, sum)
		}
		if parent.ChildWorkflowsInitiated != 1 || child.ChildWorkflowsInitiated != 0 || sum.ChildWorkflowStartsFailed != 0 {
			t.Errorf("%s: child starts intended %d (parent) %d (child), failed %d; want 1, 0, 0", c.name,
				parent.ChildWorkflowsInitiated, child.ChildWorkflowsInitiated, sum.ChildWorkflowStartsFailed)
		}
		if sum.WorkflowResets != 0 || sum.ScheduleStarts != 0 || sum.SignalsReceived != 0 || sum.Updates != 0 {
			t.Errorf("%s: actions no run of the benchmark takes: %v", c.name, sum)
		}
		if sum.Total() <= 2 {
			t.Errorf("%s: %d actions in all, no more than its two starts: %v", c.name, sum.Total(), sum)
		}
		t.Logf("%s: %v", c.name, sum)
	}
	allotRun, hand := h.counts()
	if hand.ActivitiesScheduled != 3 || hand.MarkerBatches != 0 || len(hand.Markers) != 0 {
		t.Errorf("the hand-written pair: %d activities scheduled, %d marker batches (%v); want 3 and none", hand.ActivitiesScheduled, hand.MarkerBatches, hand.Markers)
	}
	if allotRun.ActivitiesScheduled < 2 {
		t.Errorf("allot's run: %d activities scheduled, want one per step (2) at least", allotRun.ActivitiesScheduled)
	}
	t.Logf("allot %d actions, hand %d", allotRun.Total(), hand.Total())
}
