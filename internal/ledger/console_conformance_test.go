package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"allot"
)

// testEpisodesWaiting: only the episodes waiting on a person are listed,
// by outcome, pipeline and episode, a page at a time, from the outcome
// index.
func testEpisodesWaiting(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	outcomes := map[string]allot.Outcome{
		"a": allot.OutcomeNeedsAttention, "b": allot.OutcomeWaitingApproval, "c": allot.OutcomeCompleted,
		"d": allot.OutcomeFailed, "e": allot.OutcomeWaitingVendor, "f": allot.OutcomeRunning,
	}
	ids := map[string]string{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		ep := alloc(t, l, "weekly", key, "2026-W32", 0).Episode
		ids[key] = ep.ID
		if o, ok := outcomes[key]; ok {
			if err := l.RecordEpisodeOutcome(ctx, "weekly", ep.ID, o, "planted", t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := l.EpisodesWaiting(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.AllocationKey+"="+e.Outcome)
	}
	want := "d=failed a=needs_attention b=waiting_approval e=waiting_vendor"
	if strings.Join(keys, " ") != want {
		t.Fatalf("EpisodesWaiting = %v, want %s", keys, want)
	}
	if page, err := l.EpisodesWaiting(ctx, 2); err != nil || len(page) != 2 || page[0].ID != ids["d"] {
		t.Fatalf("EpisodesWaiting(2) = %+v, %v; want the first two", page, err)
	}
	if _, err := l.EpisodesWaiting(ctx, -1); err == nil {
		t.Fatal("EpisodesWaiting(-1) was accepted")
	}
	query, args := l.episodesWaitingQuery(10)
	if plan := queryPlan(t, l, l.d.q(query), args...); !strings.Contains(plan, "episodes_outcome_pipeline") {
		t.Errorf("EpisodesWaiting does not use episodes_outcome_pipeline:\nplan:\n%s", plan)
	}
}

// testChangeMarker: the marker stays put while nothing is written and
// moves with each kind of write the operator page shows.
func testChangeMarker(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	marker := func() string {
		t.Helper()
		m, err := l.ChangeMarker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	last := marker()
	if again := marker(); again != last {
		t.Fatalf("the marker moved without a write: %q then %q", last, again)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"a run outcome", func() error {
			_, err := l.RecordRunOutcome(ctx, RunOutcome{Pipeline: "weekly", AllocationKey: "k", RunID: "r1", Outcome: "allocated", Reason: ReasonNewEpisode, Sequence: 0, RecordedAt: t0})
			return err
		}},
		{"an episode parked", func() error {
			return l.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeNeedsAttention, "OutcomeUnknown", t0)
		}},
		{"the parked episode moved on", func() error {
			return l.RecordEpisodeOutcome(ctx, "weekly", ep.ID, allot.OutcomeCompleted, "", t0.Add(time.Minute))
		}},
		{"a vendor paused", func() error {
			_, err := l.PauseVendor(ctx, VendorPause{Vendor: "acme", Reason: "the bill is wrong", At: t0})
			return err
		}},
		{"a drift item", func() error {
			d := *driftOfClass(allot.DriftUncharged)
			d.Account, d.Vendor, d.Line = "acct", "acme", allot.DriftLineOfCost("vt_1")
			_, _, err := l.RecordDrift(ctx, d)
			return err
		}},
		{"a cost no budget covers", func() error {
			r := paidRef(ep, "render", 0)
			mustIntent(t, l, r)
			_, err := l.RecordSubmission(ctx, Submission{PaidTaskRef: r, RemoteRef: "vt_marker", Amount: 5, Currency: "EUR"})
			return err
		}},
		{"a charge outside a budget acknowledged", func() error {
			_, err := l.AcknowledgeCharges(ctx, []ChargeAck{{Budget: "b", Period: "2026-W32", PaidTaskRef: paidRef(ep, "render", 0), Amount: 5, Currency: "EUR", By: "carol", Reason: "before the budget"}}, t0)
			return err
		}},
		{"a hold for scheduled runs", func() error {
			_, err := l.HoldScheduled(ctx, HoldInput{Budget: BudgetLimit{Budget: "b", Currency: "USD", Limit: 1000}, Period: "2026-W32",
				Runs: []ScheduledRun{{Pipeline: "weekly", At: w32Day(3, 9), Amount: 200}}, At: w32Day(2, 0)})
			return err
		}},
		{"a hold released (the Schedule paused)", func() error {
			_, err := l.HoldScheduled(ctx, HoldInput{Budget: BudgetLimit{Budget: "b", Currency: "USD", Limit: 1000}, Period: "2026-W32", At: w32Day(2, 1)})
			return err
		}},
	} {
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		now := marker()
		if now == last {
			t.Fatalf("the marker %q did not move after %s", now, w.name)
		}
		last = now
	}
	query, args := l.changeMarkerQuery()
	plan := queryPlan(t, l, l.d.q(query), args...)
	for _, index := range []string{"run_outcomes_recorded", "episodes_outcome_pipeline", "budget_entries_held", "drift_items_unacked", "cost_entries_recorded"} {
		if !strings.Contains(plan, index) {
			t.Errorf("the change marker does not use index %s:\nplan:\n%s", index, plan)
		}
	}
}

// testRecentRunOutcomes: the newest outcomes of a window first, a page at
// a time, from run_outcomes_recorded.
func testRecentRunOutcomes(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	for i := range 5 {
		o := RunOutcome{Pipeline: "weekly", AllocationKey: fmt.Sprintf("k%d", i), RunID: "r", Outcome: "skipped", Reason: ReasonCapReached,
			Sequence: -1, RecordedAt: t0.Add(time.Duration(i) * time.Minute)}
		if _, err := l.RecordRunOutcome(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.RecentRunOutcomes(ctx, t0.Add(time.Minute), 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range got {
		keys = append(keys, o.AllocationKey)
	}
	if strings.Join(keys, " ") != "k4 k3 k2" {
		t.Fatalf("RecentRunOutcomes = %v, want k4 k3 k2", keys)
	}
	if all, err := l.RecentRunOutcomes(ctx, t0.Add(3*time.Minute), 10); err != nil || len(all) != 2 {
		t.Fatalf("RecentRunOutcomes since the 4th = %d, %v; want 2", len(all), err)
	}
	if _, err := l.RecentRunOutcomes(ctx, t0, 0); err == nil {
		t.Fatal("a page of 0 was accepted")
	}
	query, args := l.recentRunOutcomesQuery(t0, 10)
	if plan := queryPlan(t, l, l.d.q(query), args...); !strings.Contains(plan, "run_outcomes_recorded") {
		t.Errorf("RecentRunOutcomes does not use run_outcomes_recorded:\nplan:\n%s", plan)
	}
}
