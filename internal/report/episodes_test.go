package report

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver the ledger uses; the check test edits the file directly

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// testLedger is ledgertest's SQLite ledger, with this package's helpers.
type testLedger struct {
	*ledgertest.Ledger
	t    *testing.T
	path string
	led  *ledger.Ledger
}

func newTestLedger(t *testing.T) *testLedger { return asTestLedger(ledgertest.New(t)) }

func asTestLedger(l *ledgertest.Ledger) *testLedger {
	return &testLedger{Ledger: l, t: l.T, path: l.Path, led: l.Led}
}

func budgetLedger(t *testing.T) (*testLedger, []ledger.Episode) {
	l, eps := ledgertest.BudgetLedger(t)
	return asTestLedger(l), eps
}

// charge records one accepted vendor submission and its cost, the way the
// paid activities do: the intent first, then the vendor's reference.
func (l *testLedger) charge(ep ledger.Episode, step string, revision int, remoteRef string, amount int64, currency string) {
	l.t.Helper()
	ctx := context.Background()
	ref := ledger.PaidTaskRef{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: step, Revision: revision}
	if _, err := l.led.WriteIntent(ctx, ref, allot.IdempotencyKey(ep.Pipeline, ep.ID, step, revision), "operator-test"); err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: remoteRef, Amount: amount, Currency: currency}); err != nil {
		l.t.Fatal(err)
	}
}

var (
	mon     = time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)  // 2026-W32
	tue     = time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC)  // 2026-W32
	nextMon = time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC) // 2026-W33
)

func TestEpisodesListsThePipelinesEpisodesByPeriod(t *testing.T) {
	l := newTestLedger(t)
	l.Allocate("weekly", mon)
	l.Allocate("weekly", tue)
	l.Allocate("weekly", nextMon)
	l.Allocate("other", mon)
	ctx := context.Background()

	all, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly"})
	if err != nil {
		t.Fatal(err)
	}
	if got := episodeIDs(all.Episodes); !reflect.DeepEqual(got, []string{"2026-W32-0", "2026-W32-1", "2026-W33-0"}) {
		t.Fatalf("weekly's episodes %v", got)
	}
	w32, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Period: "2026-W32"})
	if err != nil {
		t.Fatal(err)
	}
	if got := episodeIDs(w32.Episodes); !reflect.DeepEqual(got, []string{"2026-W32-0", "2026-W32-1"}) || w32.Period != "2026-W32" || w32.Pipeline != "weekly" {
		t.Fatalf("weekly's 2026-W32: %+v", w32)
	}
	if w32.Episodes[1].AllocationKey != allot.AllocationKey("weekly", tue) || !w32.Episodes[1].NominalTime.Equal(tue) {
		t.Fatalf("second episode %+v, want the key and nominal time of %s", w32.Episodes[1], tue)
	}

	// No episodes is an empty list, so --json prints [] and not null.
	none, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Period: "2026-W40"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(none)
	if !strings.Contains(string(data), `"episodes":[]`) {
		t.Fatalf("an empty period encodes as %s, want an empty list", data)
	}
}

func TestLedgerCommandsRefuseBadInput(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	// One check for every --period (pipeline.CheckPeriodOf): the same
	// error and fix from episodes and costs, as from budget show.
	for _, period := range []string{"W32", "2026-W3", "2026-w32", "2026-8-7", "2026-08-07T00:00:00Z", "32", "2026-W32 ", "2026-W99", "last-week", "2025-W53", "2026-08"} {
		_, eerr := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Period: period})
		_, cerr := Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: period})
		if eerr == nil || !strings.Contains(eerr.Error(), fmt.Sprintf("pipeline weekly: period %q is not", period)) &&
			!strings.Contains(eerr.Error(), fmt.Sprintf("pipeline weekly counts ISO weeks: period %q is not one; write it like 2026-W32", period)) || !isType(eerr, allot.InvalidInput) {
			t.Errorf("Episodes with period %q: %v, want it refused as not a period of the pipeline", period, eerr)
		}
		if cerr == nil || fmt.Sprint(cerr) != fmt.Sprint(eerr) {
			t.Errorf("Costs with period %q: %v, want the same error as episodes: %v", period, cerr, eerr)
		}
	}
	// With the pipeline file, the pipeline's kind decides: a day is not a
	// period of an ISO-week pipeline, a week not one of a daily one; the
	// error is the one budget show gives for its budget.
	set, err := pipeline.Parse([]byte(ledgertest.BudgetSet), "budgets_test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Period: "2026-08-07", Pipelines: set}); err == nil ||
		!strings.Contains(err.Error(), `pipeline weekly counts ISO weeks: period "2026-08-07" is not one; write it like 2026-W32`) {
		t.Errorf("a day for an ISO-week pipeline: %v", err)
	}
	if _, err := Costs(ctx, l.led, CostsInput{Pipeline: "daily", Period: "2026-W32", Pipelines: set}); err == nil ||
		!strings.Contains(err.Error(), `pipeline daily counts days: period "2026-W32" is not one; write it like 2026-08-07`) {
		t.Errorf("a week for a daily pipeline: %v", err)
	}
	_, berr := BudgetShow(ctx, l.led, BudgetShowInput{Pipelines: set, Budget: "video-weekly", Period: "2026-W99"})
	if berr == nil || !strings.Contains(berr.Error(), `budget video-weekly counts ISO weeks: period "2026-W99" is not one; write it like 2026-W32`) {
		t.Errorf("budget show with 2026-W99: %v", berr)
	}
	for _, period := range []string{"2026-W32", "2026-W01", "2026-08-07", "2027-01-01"} {
		if _, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: "weekly", Period: period}); err != nil {
			t.Errorf("Episodes with period %q: %v", period, err)
		}
		if _, err := Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: period}); err != nil {
			t.Errorf("Costs with period %q: %v", period, err)
		}
	}
	for _, name := range []string{"", "Weekly Video", "../weekly", "weekly/video"} {
		if _, err := Episodes(ctx, l.led, EpisodesInput{Pipeline: name}); err == nil {
			t.Errorf("Episodes accepted pipeline name %q", name)
		}
		if _, err := Costs(ctx, l.led, CostsInput{Pipeline: name}); err == nil {
			t.Errorf("Costs accepted pipeline name %q", name)
		}
		if _, err := Stats(ctx, l.led, StatsInput{Pipeline: name}); err == nil {
			t.Errorf("Stats accepted pipeline name %q", name)
		}
		if _, err := Show(ctx, l.led, nil, name, "2026-W32-0"); err == nil {
			t.Errorf("Show accepted pipeline name %q", name)
		}
	}
	if _, err := Check(ctx, l.led, "Weekly Video"); err == nil {
		t.Error("Check accepted an invalid pipeline name")
	}
}

func TestCheckFindsASequenceGap(t *testing.T) {
	l := newTestLedger(t)
	l.Allocate("weekly", mon)
	l.Allocate("weekly", tue)
	l.Allocate("other", mon)
	ctx := context.Background()

	clean, err := Check(ctx, l.led, "")
	if err != nil {
		t.Fatal(err)
	}
	if !clean.OK || clean.Violations == nil || len(clean.Violations) != 0 {
		t.Fatalf("check of a sound ledger: %+v", clean)
	}

	// Break invariant 2 behind the ledger's back: 2026-W32 of weekly now
	// holds sequences 0 and 3.
	l.led.Close()
	db, err := sql.Open("sqlite", l.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE episodes SET sequence = 3 WHERE pipeline = 'weekly' AND episode_id = '2026-W32-1'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	led, err := ledger.OpenReadOnly(ctx, "sqlite:"+l.path)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()

	broken, err := Check(ctx, led, "")
	if err != nil {
		t.Fatal(err)
	}
	if broken.OK || len(broken.Violations) == 0 {
		t.Fatalf("check missed the gap: %+v", broken)
	}
	for _, v := range broken.Violations {
		if v.Invariant != 2 || v.Pipeline != "weekly" || !strings.Contains(v.Detail, "2026-W32") {
			t.Errorf("violation %+v, want invariant 2 of weekly's 2026-W32", v)
		}
	}
	if other, err := Check(ctx, led, "other"); err != nil || !other.OK || other.Pipeline != "other" {
		t.Fatalf("check of the other pipeline alone: %+v, %v", other, err)
	}
}

func TestStatsCountsRunsAndEpisodesByOutcome(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	first := l.Allocate("weekly", mon)
	second := l.Allocate("weekly", tue)
	l.Allocate("weekly", nextMon)
	l.Allocate("other", mon)
	old := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	recent := time.Date(2026, 8, 5, 0, 0, 0, 0, time.UTC)
	for i, o := range []ledger.RunOutcome{
		{AllocationKey: "k0", Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, RecordedAt: old},
		{AllocationKey: "k0", Outcome: allot.OutcomeReused, Reason: ledger.ReasonKeyBound, RecordedAt: recent},
		{AllocationKey: "k1", Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, RecordedAt: recent},
		{AllocationKey: "k2", Outcome: allot.OutcomeSkipped, Reason: ledger.ReasonCapReached, RecordedAt: recent},
		{AllocationKey: "k3", Outcome: allot.OutcomeFailed, Reason: "InjectedFailure", RecordedAt: recent},
	} {
		o.Pipeline, o.RunID, o.NominalTime, o.Sequence = "weekly", "run-"+string(rune('a'+i)), mon, -1
		if _, err := l.led.RecordRunOutcome(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.led.RecordRunOutcome(ctx, ledger.RunOutcome{Pipeline: "other", AllocationKey: "k", RunID: "r", Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, Sequence: -1}); err != nil {
		t.Fatal(err)
	}
	if err := l.led.RecordEpisodeOutcome(ctx, "weekly", first.ID, allot.OutcomeNeedsAttention, allot.OutcomeUnknown, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := l.led.RecordEpisodeOutcome(ctx, "weekly", second.ID, allot.OutcomeCompleted, "", time.Time{}); err != nil {
		t.Fatal(err)
	}

	all, err := Stats(ctx, l.led, StatsInput{Pipeline: "weekly"})
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := []ledger.OutcomeCount{
		{Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, Count: 2},
		{Outcome: allot.OutcomeFailed, Reason: "InjectedFailure", Count: 1},
		{Outcome: allot.OutcomeReused, Reason: ledger.ReasonKeyBound, Count: 1},
		{Outcome: allot.OutcomeSkipped, Reason: ledger.ReasonCapReached, Count: 1},
	}
	wantEpisodes := []ledger.OutcomeCount{
		{Outcome: allot.OutcomeAllocated, Count: 1},
		{Outcome: allot.OutcomeCompleted, Reason: allot.ReasonStepsCompleted, Count: 1},
		{Outcome: allot.OutcomeNeedsAttention, Reason: allot.OutcomeUnknown, Count: 1},
	}
	if !reflect.DeepEqual(all.Runs, wantRuns) || all.RunsTotal != 5 {
		t.Errorf("runs %+v (total %d), want %+v (total 5)", all.Runs, all.RunsTotal, wantRuns)
	}
	if !reflect.DeepEqual(all.Episodes, wantEpisodes) || all.EpisodesTotal != 3 {
		t.Errorf("episodes %+v (total %d), want %+v (total 3)", all.Episodes, all.EpisodesTotal, wantEpisodes)
	}

	// Since counts what was recorded (runs) or created (episodes) from then on.
	since, err := Stats(ctx, l.led, StatsInput{Pipeline: "weekly", Since: time.Date(2026, 8, 2, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if since.RunsTotal != 4 || since.Runs[0] != (ledger.OutcomeCount{Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, Count: 1}) {
		t.Errorf("runs since 2026-08-02: %+v (total %d), want the old allocation left out", since.Runs, since.RunsTotal)
	}
	future, err := Stats(ctx, l.led, StatsInput{Pipeline: "weekly", Since: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if future.RunsTotal != 0 || future.EpisodesTotal != 0 || future.Runs == nil || future.Episodes == nil {
		t.Errorf("stats since the future: %+v, want zero counts as empty lists", future)
	}
}

func TestCostsSumsPerEpisodeAndStepWithTotalsPerCurrency(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	ep := l.Allocate("weekly", mon)
	l.Allocate("weekly", tue) // no paid work: no cost line
	later := l.Allocate("weekly", nextMon)
	l.charge(ep, "video", 0, "vt_00000000000000000000000000000001", 250, "USD")
	l.charge(ep, "video", 1, "vt_00000000000000000000000000000002", 300, "USD")
	l.charge(ep, "cover", 0, "vt_00000000000000000000000000000003", 100, "USD")
	l.charge(later, "video", 0, "vt_00000000000000000000000000000004", 50, "EUR")
	other := l.Allocate("other", mon)
	l.charge(other, "video", 0, "vt_00000000000000000000000000000005", 999, "USD")

	w32, err := Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: "2026-W32"})
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]CostLine{}
	for _, line := range w32.Lines {
		lines[line.EpisodeID+"/"+line.Step] = line
	}
	want := map[string]CostLine{
		"2026-W32-0/video": {EpisodeID: "2026-W32-0", Period: "2026-W32", Step: "video", Revisions: 2, Amount: 550, Currency: "USD"},
		"2026-W32-0/cover": {EpisodeID: "2026-W32-0", Period: "2026-W32", Step: "cover", Revisions: 1, Amount: 100, Currency: "USD"},
	}
	if !reflect.DeepEqual(lines, want) || len(w32.Lines) != 2 {
		t.Errorf("2026-W32 cost lines %+v, want %+v", w32.Lines, want)
	}
	if !reflect.DeepEqual(w32.Totals, map[string]int64{"USD": 650}) {
		t.Errorf("2026-W32 totals %v, want 650 USD", w32.Totals)
	}

	all, err := Costs(ctx, l.led, CostsInput{Pipeline: "weekly"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Lines) != 3 || !reflect.DeepEqual(all.Totals, map[string]int64{"USD": 650, "EUR": 50}) {
		t.Errorf("all of weekly's costs: %+v, want 3 lines, 650 USD and 50 EUR", all)
	}

	none, err := Costs(ctx, l.led, CostsInput{Pipeline: "weekly", Period: "2026-W40"})
	if err != nil || none.Lines == nil || len(none.Lines) != 0 || len(none.Totals) != 0 {
		t.Errorf("a period without costs: %+v, %v", none, err)
	}
}

func TestShowReadsOneEpisodeFromTheLedger(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	ep := l.Allocate("weekly", mon)
	sibling := l.Allocate("weekly", tue)
	l.charge(ep, "video", 0, "vt_00000000000000000000000000000001", 250, "USD")
	l.charge(sibling, "video", 0, "vt_00000000000000000000000000000002", 400, "USD")

	show, err := Show(ctx, l.led, nil, "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if show.Episode.ID != ep.ID || show.Episode.AllocationKey != ep.AllocationKey || show.Workflow != nil {
		t.Fatalf("show %+v, want episode %s and no workflow (no client)", show, ep.ID)
	}
	if len(show.PaidTasks) != 1 || show.PaidTasks[0].RemoteRef != "vt_00000000000000000000000000000001" || show.PaidTasks[0].State != allot.PaidSubmitted {
		t.Errorf("paid tasks %+v", show.PaidTasks)
	}
	if len(show.Costs) != 1 || !reflect.DeepEqual(show.Totals, map[string]int64{"USD": 250}) {
		t.Errorf("costs %+v, totals %v: want only this episode's 250 USD", show.Costs, show.Totals)
	}

	if _, err := Show(ctx, l.led, nil, "weekly", "2026-W32-7"); !errors.Is(err, ledger.ErrEpisodeNotFound) {
		t.Errorf("show of a missing episode: %v, want ErrEpisodeNotFound", err)
	}
	if _, err := Show(ctx, l.led, nil, "weekly", ""); err == nil || !strings.Contains(err.Error(), "--episode") {
		t.Errorf("show without an episode: %v, want --episode asked for", err)
	}
}

func episodeIDs(eps []EpisodeView) []string {
	ids := []string{}
	for _, e := range eps {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestTotalsThatWouldOverflowAreRefusedAndChecked: absurd amounts written
// around the ledger's bound (an import before v10 could write them) make
// costs and episode show fail with ErrAmountOverflow instead of printing a
// wrapped total, and check reports them.
func TestTotalsThatWouldOverflowAreRefusedAndChecked(t *testing.T) {
	l := newTestLedger(t)
	ep := l.Allocate("weekly", mon)
	l.charge(ep, "video", 0, "vt_a", 250, "USD")
	l.charge(ep, "cover", 0, "vt_b", 40, "USD")
	ctx := context.Background()
	l.led.Close()
	db, err := sql.Open("sqlite", l.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE cost_entries SET amount = 9223372036854775807 WHERE remote_ref = 'vt_a'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	led, err := ledger.OpenReadOnly(ctx, "sqlite:"+l.path)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()

	if res, err := Costs(ctx, led, CostsInput{Pipeline: "weekly"}); !errors.Is(err, allot.ErrAmountOverflow) || !strings.Contains(err.Error(), "starter check --pipeline weekly") {
		t.Errorf("costs over an absurd entry: %+v, %v; want ErrAmountOverflow naming the check", res, err)
	}
	if res, err := Show(ctx, led, nil, "weekly", ep.ID); !errors.Is(err, allot.ErrAmountOverflow) {
		t.Errorf("episode show over an absurd entry: %+v, %v; want ErrAmountOverflow", res.Totals, err)
	}
	check, err := Check(ctx, led, "weekly")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, v := range check.Violations {
		kinds = append(kinds, v.Kind)
	}
	if check.OK || !slices.Contains(kinds, ledger.KindCostOutOfRange) {
		t.Fatalf("check of an absurd cost: ok %v, %v", check.OK, check.Violations)
	}
}
