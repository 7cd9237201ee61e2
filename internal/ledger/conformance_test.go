package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The conformance suite: every behaviour the rest of allot relies on, run
// unchanged against each driver (see sqlite_test.go, postgres_test.go).

var t0 = time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC) // a Monday in 2026-W32

// newURL returns the URL of a fresh, empty database that lives as long as
// the test; most tests get a ledger opened on it, a few (migrations) take
// the URL itself.
func runConformance(t *testing.T, newURL func(t *testing.T) string) {
	open := func(t *testing.T) *Ledger { return openURLT(t, newURL(t)) }
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, l *Ledger)
	}{
		{"ConcurrentDistinctKeys", testConcurrentDistinctKeys},
		{"ConcurrentSameKey", testConcurrentSameKey},
		{"ReuseReturnsStoredEpisode", testReuse},
		{"KeyCrossesPeriod", testKeyCrossesPeriod},
		{"NewPeriodStartsAtZero", testNewPeriodStartsAtZero},
		{"CapSkips", testCapSkips},
		{"Ambiguous", testAmbiguous},
		{"CheckClean", testCheckClean},
		{"CheckTampered", testCheckTampered},
		{"CompleteKeepsFirstTime", testComplete},
		{"RunOutcomeUpsert", testRunOutcomes},
		{"PipelinesIndependent", testPipelinesIndependent},
		{"InvalidInput", testInvalidInput},
		{"Lookups", testLookups},
		{"Steps", testSteps},
		// Paid tasks, owners, costs and decisions (paid_conformance_test.go).
		{"PaidHappyPath", testPaidHappyPath},
		{"PaidIntentNeedsEpisode", testPaidIntentNeedsEpisode},
		{"PaidRetryResumes", testPaidRetryResumes},
		{"PaidConcurrentIntent", testPaidConcurrentIntent},
		{"PaidSubmissionCostOnce", testPaidSubmissionCostOnce},
		{"PaidEffectStepNoCost", testPaidEffectStepNoCost},
		{"PaidRemoteRefConflict", testPaidRemoteRefConflict},
		{"PaidResultNeverOverwritten", testPaidResultNeverOverwritten},
		{"PaidFailure", testPaidFailure},
		{"Rework", testRework},
		{"ReworkConcurrent", testReworkConcurrent},
		{"ReleaseAndAbandon", testReleaseAndAbandon},
		{"Decisions", testDecisions},
		{"CostsByPeriod", testCostsByPeriod},
		{"CostBound", testCostBound},
		{"ReassembleResetsSteps", testReassembleResetsSteps},
		{"PaidInvalidInput", testPaidInvalidInput},
		{"CheckPaidClean", testCheckPaidClean},
		{"CheckPaidTampered", testCheckPaidTampered},
		{"PaidOwnership", testPaidOwnership},
		{"PaidMaybeSent", testPaidMaybeSent},
		{"PaidReleaseEndsTheSend", testPaidReleaseEndsTheSend},
		{"PaidResubmitPermission", testPaidResubmitPermission},
		{"PaidTakeIntentRace", testPaidTakeIntentRace},
		{"PaidTakeOverNeedsFreshView", testPaidTakeOverNeedsFreshView},
		// Decide: idempotency, atomicity, every action in every state
		// (decisions_conformance_test.go).
		{"DecideIdempotent", testDecideIdempotent},
		{"DecideConcurrentSameRequest", testDecideConcurrentSameRequest},
		{"DecideAtomic", testDecideAtomic},
		{"DecideActionsByState", testDecideActionsByState},
		{"DecideEpisodeActions", testDecideEpisodeActions},
		{"DecideRecordsWho", testDecideRecordsWho},
		{"DecideAdoptChecksCost", testDecideAdoptChecksCost},
		// The paid-task state machine against a model (paid_model_test.go).
		{"PaidStateMachineModel", testPaidStateMachineModel},
		// Step plans (plan_conformance_test.go).
		{"EpisodePlan", testEpisodePlan},
		// Episode outcomes and outcome counts (outcomes_conformance_test.go).
		{"EpisodeOutcomes", testEpisodeOutcomes},
		{"EpisodeOutcomeInvalid", testEpisodeOutcomeInvalid},
		{"RunOutcomeCounts", testRunOutcomeCounts},
		{"EpisodeOutcomeCounts", testEpisodeOutcomeCounts},
		{"EpisodesNeedingAttention", testEpisodesNeedingAttention},
		{"EpisodesWaitingOnPausedVendor", testEpisodesWaitingOnPausedVendor},
		{"OutcomeQueriesUseIndexes", testOutcomeQueriesUseIndexes},
		// Imports from an old system (import_conformance_test.go).
		{"ImportCreatesEpisodes", testImportCreatesEpisodes},
		{"ImportConflicts", testImportConflicts},
		{"ImportMoved", testImportMoved},
		{"ImportInvalid", testImportInvalid},
		{"ImportThenRework", testImportThenRework},
		{"ImportOwnsItsTimes", testImportOwnsItsTimes},
		{"ImportOverCap", testImportOverCap},
		{"ImportRefusesTheImpossible", testImportRefusesTheImpossible},
		{"ImportCountsAgainstBudgets", testImportCountsAgainstBudgets},
		{"ImportOverBudget", testImportOverBudget},
		{"ImportCurrencyAgainstBudget", testImportCurrencyAgainstBudget},
		// The audit behind starter check (audit_conformance_test.go).
		{"AuditClean", testAuditClean},
		{"AuditPlanted", testAuditPlanted},
		// The allocating run's answer, and inputs (inputs_conformance_test.go).
		{"AllocatingRunGetsItsAnswer", testAllocatingRunGetsItsAnswer},
		{"InputsAddWithdraw", testInputsAddWithdraw},
		{"InputsClaim", testInputsClaim},
		{"InputsConcurrentClaims", testInputsConcurrentClaims},
		// Group commit (allocbatch_conformance_test.go).
		{"GroupCommitNeighbours", testGroupCommitNeighbours},
		{"GroupCommitMixed", testGroupCommitMixed},
		{"GroupCommitInputs", testGroupCommitInputs},
		{"GroupCommitCancelledCaller", testGroupCommitCancelledCaller},
		// Budgets (budgets_conformance_test.go, budgets_model_test.go).
		{"BudgetConcurrentAdmissions", testBudgetConcurrentAdmissions},
		{"BudgetReleaseFreesOne", testBudgetReleaseFreesOne},
		{"BudgetAdmissionInTheIntentsTransaction", testBudgetAdmissionInTheIntentsTransaction},
		{"BudgetEpisodeAdmittedWhole", testBudgetEpisodeAdmittedWhole},
		{"BudgetUnknownOutcomeKept", testBudgetUnknownOutcomeKept},
		{"BudgetRaiseOnePeriod", testBudgetRaiseOnePeriod},
		{"BudgetInvalidReservations", testBudgetInvalidReservations},
		{"BudgetAlertsOnce", testBudgetAlertsOnce},
		{"BudgetAuditTampered", testBudgetAuditTampered},
		{"BudgetModel", testBudgetModel},
		{"BudgetGaugedPeriods", testBudgetGaugedPeriods},
		{"BudgetHoldsScheduled", testBudgetHoldsScheduled},
		{"BudgetHoldsLapse", testBudgetHoldsLapse},
		{"BudgetHoldsModel", testBudgetHoldsModel},
		// Vendor controls: pause, slots, rate, breaker (vendor_conformance_test.go).
		{"VendorPauseResume", testVendorPauseResume},
		{"VendorPauseHistory", testVendorPauseHistory},
		{"VendorResumeRace", testVendorResumeRace},
		{"VendorEnforcedLimits", testVendorEnforcedLimits},
		{"VendorCapabilities", testVendorCapabilities},
		{"ChargesOutsideBudget", testChargesOutsideBudget},
		{"CostLines", testCostLines},
		{"VendorSlots", testVendorSlots},
		{"VendorSlotsConcurrent", testVendorSlotsConcurrent},
		{"VendorRate", testVendorRate},
		{"VendorBreaker", testVendorBreaker},
		// The vendor's bill and its drift items (bill_conformance_test.go).
		{"BillWatermark", testBillWatermark},
		{"BillWatermarkConcurrent", testBillWatermarkConcurrent},
		{"BillLinesStoredOnce", testBillLinesStoredOnce},
		{"BillInvalidPage", testBillInvalidPage},
		{"BillJudgeOnce", testBillJudgeOnce},
		{"BillRecordDriftOnce", testBillRecordDriftOnce},
		{"BillEarlierCharge", testBillEarlierCharge},
		{"BillPaidTaskBilled", testBillPaidTaskBilled},
		{"BillUnbilledCosts", testBillUnbilledCosts},
		{"BillDriftItems", testBillDriftItems},
		{"BillAckDrift", testBillAckDrift},
		{"BillDriftTotals", testBillDriftTotals},
		{"BillQueriesUseIndexes", testBillQueriesUseIndexes},
		// Vendor batches (batches_conformance_test.go).
		{"BatchLifecycle", testBatchLifecycle},
		{"BatchUnknownCreateLooksOnly", testBatchUnknownCreateLooksOnly},
		{"BatchNotCreatedReturnsItems", testBatchNotCreatedReturnsItems},
		{"BatchResultLostParks", testBatchResultLostParks},
		{"BatchRefusals", testBatchRefusals},
		{"BatchQueueCap", testBatchQueueCap},
		{"BatchItemAbandonedOutside", testBatchItemAbandonedOutside},
		{"BatchItemAbandonedBeforeCreate", testBatchItemAbandonedBeforeCreate},
		{"BatchItemInOneBatch", testBatchItemInOneBatch},
		{"BatchStateMachineModel", testBatchStateMachineModel},
		// Period deadlines (deadlines_conformance_test.go).
		{"DeadlineDeclare", testDeadlineDeclare},
		{"DeadlineJudgeOnce", testDeadlineJudgeOnce},
		{"DeadlineCompletedLate", testDeadlineCompletedLate},
		{"DeadlineJudgeRacesCompletion", testDeadlineJudgeRacesCompletion},
		{"DeadlineInvalidJudgement", testDeadlineInvalidJudgement},
		{"DeadlineReads", testDeadlineReads},
		{"DeadlineQueriesUseIndexes", testDeadlineQueriesUseIndexes},
		// What a budget period's forecast reads (forecast_conformance_test.go).
		{"ForecastCounts", testForecastCounts},
		// What the operator page reads (console_conformance_test.go).
		{"EpisodesWaiting", testEpisodesWaiting},
		{"ChangeMarker", testChangeMarker},
		{"RecentRunOutcomes", testRecentRunOutcomes},
		{"SpendPerDay", testSpendPerDay},
		{"SpendPerDayUsesIndex", testSpendPerDayUsesIndex},
		// The operator page's ended sessions (sessions_conformance_test.go).
		{"EndedSessions", testEndedSessions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
	// The allocation cases again with every call in a transaction of its
	// own, the answers group commit must agree with.
	for _, tc := range unbatchedAllocationCases {
		t.Run("Unbatched/"+tc.name, func(t *testing.T) {
			t.Parallel()
			l := open(t)
			l.alloc.off = true
			tc.fn(t, l)
		})
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, url string)
	}{
		{"MigrateV1ToV2", testMigrateV1ToV2},
		{"MigrateV2ToV3", testMigrateV2ToV3},
		{"MigrateV3ToV4", testMigrateV3ToV4},
		{"MigrateV8ToV9", testMigrateV8ToV9},
		{"MigrateV9ToV10", testMigrateV9ToV10},
		{"IdentityCreatedOnceAndKept", testIdentityCreatedOnceAndKept},
		{"OnlyOpenCreates", testOnlyOpenCreates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newURL(t))
		})
	}
}

// openURLT opens (creating and migrating) the ledger at url for one test.
func openURLT(t *testing.T, url string) *Ledger {
	t.Helper()
	l, err := Open(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ledgerAtVersion connects to the empty database at url and migrates it to
// version only, standing for a ledger an older build created. The caller
// closes it. Only raw SQL and the API calls that read no newer column may
// write to it.
func ledgerAtVersion(t *testing.T, url string, version int) *Ledger {
	t.Helper()
	ctx := ctxT(t)
	l, err := connect(ctx, url, openCreate)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.migrate(ctx, version); err != nil {
		_ = l.Close()
		t.Fatal(err)
	}
	if v, err := schemaVersion(ctx, l.w, l.d); err != nil || v != version {
		_ = l.Close()
		t.Fatalf("ledger built at version %d reports version %d, %v", version, v, err)
	}
	return l
}

// mustBeAtLatestVersion fails unless schema_migrations records exactly the
// versions 1..N of this build's N migrations.
func mustBeAtLatestVersion(t *testing.T, l *Ledger) {
	t.Helper()
	rows, err := l.r.QueryContext(ctxT(t), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var want []int
	for v := range migrationCount(t, l) {
		want = append(want, v+1)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("schema_migrations versions %v, want %v", versions, want)
	}
}

// migrationCount is the number of migrations this build has for l's dialect.
func migrationCount(t *testing.T, l *Ledger) int {
	t.Helper()
	ms, err := loadMigrations(l.d.migrations)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// ctxT is a context for t, cancelled by its cleanup (not at the test's
// end, as t.Context is: cleanups use it too), with no deadline of its
// own. go test's -timeout bounds a hang; a deadline here timed out the
// batch model test (121 s) under the race detector on a busy 2-core
// machine, a timing the test does not mean to assert.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func alloc(t *testing.T, l *Ledger, pipeline, key, period string, maxPer int) AllocateResult {
	t.Helper()
	res, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: pipeline, Key: key, Period: period, NominalTime: t0, MaxPerPeriod: maxPer})
	if err != nil {
		t.Fatalf("Allocate(%s, %s, %s): %v", pipeline, key, period, err)
	}
	return res
}

// rawExec runs SQL around the ledger's API, as a legacy import would.
func rawExec(t *testing.T, l *Ledger, query string, args ...any) {
	t.Helper()
	if _, err := l.w.ExecContext(ctxT(t), l.d.q(query), args...); err != nil {
		t.Fatalf("raw %q: %v", query, err)
	}
}

func rawInsertEpisode(t *testing.T, l *Ledger, pipeline, id, period string, seq int, key string) {
	t.Helper()
	rawExec(t, l, `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'allocated')`, pipeline, id, period, seq, key, l.d.timeArg(t0), l.d.timeArg(t0))
}

// rawInsertStep writes a step record with the columns every schema version
// has, as an older build would.
func rawInsertStep(t *testing.T, l *Ledger, pipeline, episodeID, step, status string) {
	t.Helper()
	rawExec(t, l, `INSERT INTO step_records (pipeline, episode_id, step, status, completed_at) VALUES (?, ?, ?, ?, ?)`,
		pipeline, episodeID, step, status, l.d.timeArg(t0))
}

func dropUniqueIndexes(t *testing.T, l *Ledger) {
	rawExec(t, l, `DROP INDEX episodes_pipeline_key_uniq`)
	rawExec(t, l, `DROP INDEX episodes_pipeline_period_seq_uniq`)
}

func countRows(t *testing.T, l *Ledger, table string) int {
	t.Helper()
	var n int
	if err := l.w.QueryRowContext(ctxT(t), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// dumpedTables are the tables dumpTables reads, each with a full ordering.
var dumpedTables = []struct{ name, order string }{
	{"episodes", "pipeline, episode_id"},
	{"step_records", "pipeline, episode_id, step"},
	{"paid_tasks", "pipeline, episode_id, step, revision"},
	{"cost_entries", "remote_ref"},
	{"operator_decisions", "id"},
}

// dumpTables reads every row of the ledger's episode, step, paid-task,
// cost and decision tables, every column printed, so that a test can show
// that a refused call wrote nothing at all (not even a timestamp).
func dumpTables(t *testing.T, l *Ledger) map[string][]string {
	t.Helper()
	return dumpEpisodeTables(ctxT(t), t, l, "", "")
}

// dumpEpisodeTables is dumpTables limited to one episode's rows (every
// episode when episodeID is "").
func dumpEpisodeTables(ctx context.Context, t *testing.T, l *Ledger, pipeline, episodeID string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, tb := range dumpedTables {
		rows, err := l.w.QueryContext(ctx, l.d.q(`SELECT * FROM `+tb.name+`
			WHERE (? = '' OR pipeline = ?) AND (? = '' OR episode_id = ?) ORDER BY `+tb.order),
			pipeline, pipeline, episodeID, episodeID)
		if err != nil {
			t.Fatalf("dump %s: %v", tb.name, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			for i := range vals {
				vals[i] = new(any)
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatalf("dump %s: %v", tb.name, err)
			}
			var b strings.Builder
			for i, v := range vals {
				v := *(v.(*any))
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%v ", cols[i], v)
			}
			out[tb.name] = append(out[tb.name], b.String())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
	}
	return out
}

// mustBeUnchanged fails unless the ledger's tables are exactly as dumped in
// before: what names the call that should have written nothing.
func mustBeUnchanged(t *testing.T, l *Ledger, what string, before map[string][]string) {
	t.Helper()
	if diff := dumpDiff(before, dumpTables(t, l)); diff != "" {
		t.Fatalf("%s wrote: %s", what, diff)
	}
}

// dumpDiff describes the first table that differs between two dumps; "" if
// none does.
func dumpDiff(before, after map[string][]string) string {
	for _, tb := range dumpedTables {
		if !slices.Equal(before[tb.name], after[tb.name]) {
			return fmt.Sprintf("%s changed from\n  %s\nto\n  %s", tb.name,
				strings.Join(before[tb.name], "\n  "), strings.Join(after[tb.name], "\n  "))
		}
	}
	return ""
}

func mustCheckClean(t *testing.T, l *Ledger, pipeline string) {
	t.Helper()
	vs, err := l.Check(ctxT(t), pipeline)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(vs) != 0 {
		t.Fatalf("Check(%q) on clean data reported %v", pipeline, vs)
	}
}

func testConcurrentDistinctKeys(t *testing.T, l *Ledger) {
	const n = 50
	var wg sync.WaitGroup
	results := make([]AllocateResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = l.Allocate(ctxT(t), AllocateInput{
				Pipeline: "weekly", Key: fmt.Sprintf("run-%02d", i), Period: "2026-W32", NominalTime: t0,
			})
		})
	}
	close(start)
	wg.Wait()
	var seqs []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		r := results[i]
		if r.Decision != DecisionAllocated || r.Reason != ReasonNewEpisode {
			t.Fatalf("caller %d: got %s/%s, want allocated/new_episode", i, r.Decision, r.Reason)
		}
		if r.Episode.ID != EpisodeID("2026-W32", r.Episode.Sequence) {
			t.Fatalf("caller %d: ID %q does not match sequence %d", i, r.Episode.ID, r.Episode.Sequence)
		}
		seqs = append(seqs, r.Episode.Sequence)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != i {
			t.Fatalf("sequences are not 0..%d without gap or duplicate: %v", n-1, seqs)
		}
	}
	eps, err := l.ListEpisodes(ctxT(t), "weekly", "2026-W32")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != n {
		t.Fatalf("ListEpisodes: %d episodes, want %d", len(eps), n)
	}
	for i, e := range eps {
		if e.Sequence != i {
			t.Fatalf("ListEpisodes not ordered by sequence: position %d holds %d", i, e.Sequence)
		}
	}
	mustCheckClean(t, l, "")
}

func testConcurrentSameKey(t *testing.T, l *Ledger) {
	const n = 20
	var wg sync.WaitGroup
	results := make([]AllocateResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = l.Allocate(ctxT(t), AllocateInput{
				Pipeline: "weekly", Key: "sched-2026-08-03T09:00:00Z", Period: "2026-W32", NominalTime: t0,
			})
		})
	}
	close(start)
	wg.Wait()
	allocated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		switch results[i].Decision {
		case DecisionAllocated:
			allocated++
		case DecisionReused:
			if results[i].Reason != ReasonKeyBound {
				t.Fatalf("caller %d: reused with reason %q", i, results[i].Reason)
			}
		default:
			t.Fatalf("caller %d: decision %s", i, results[i].Decision)
		}
		if results[i].Episode.ID != "2026-W32-0" {
			t.Fatalf("caller %d got episode %q, want 2026-W32-0", i, results[i].Episode.ID)
		}
	}
	if allocated != 1 {
		t.Fatalf("%d callers allocated, want exactly 1", allocated)
	}
	if got := countRows(t, l, "episodes"); got != 1 {
		t.Fatalf("%d episodes stored, want 1", got)
	}
}

func testReuse(t *testing.T, l *Ledger) {
	nominal := time.Date(2026, 8, 4, 10, 30, 0, 123456789, time.FixedZone("CEST", 2*3600))
	first, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "k", Period: "2026-W32", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	if first.Decision != DecisionAllocated || first.Episode.ID != "2026-W32-0" || first.Episode.Status != EpisodeAllocated {
		t.Fatalf("first allocation: %+v", first)
	}
	if want := nominal.UTC().Truncate(time.Microsecond); !first.Episode.NominalTime.Equal(want) || first.Episode.NominalTime.Location() != time.UTC {
		t.Fatalf("nominal time %v, want %v in UTC", first.Episode.NominalTime, want)
	}
	if first.Episode.CreatedAt.IsZero() || !first.Episode.CompletedAt.IsZero() {
		t.Fatalf("created/completed: %+v", first.Episode)
	}
	// A retry, even with a different nominal time in the same period, gets
	// back exactly what the first attempt stored.
	again, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "k", Period: "2026-W32", NominalTime: nominal.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Decision != DecisionReused || again.Reason != ReasonKeyBound || again.Episode != first.Episode {
		t.Fatalf("retry: got %+v, want reused %+v", again, first.Episode)
	}
	got, err := l.Episode(ctxT(t), "weekly", "2026-W32-0")
	if err != nil {
		t.Fatal(err)
	}
	if got != first.Episode {
		t.Fatalf("Episode: got %+v, want %+v", got, first.Episode)
	}
}

func testKeyCrossesPeriod(t *testing.T, l *Ledger) {
	alloc(t, l, "weekly", "k", "2026-W32", 0)
	alloc(t, l, "weekly", "other", "2026-W32", 0)
	before := countRows(t, l, "episodes")
	_, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "k", Period: "2026-W33", NominalTime: t0.AddDate(0, 0, 7)})
	if !errors.Is(err, ErrKeyCrossesPeriod) {
		t.Fatalf("got %v, want ErrKeyCrossesPeriod", err)
	}
	for _, want := range []string{`"k"`, "2026-W32-0", "2026-W32", "2026-W33"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if after := countRows(t, l, "episodes"); after != before {
		t.Fatalf("episodes went from %d to %d: a refused allocation wrote", before, after)
	}
	if eps, _ := l.ListEpisodes(ctxT(t), "weekly", "2026-W33"); len(eps) != 0 {
		t.Fatalf("period 2026-W33 got episodes: %+v", eps)
	}
}

func testNewPeriodStartsAtZero(t *testing.T, l *Ledger) {
	for i := range 3 {
		if r := alloc(t, l, "weekly", fmt.Sprintf("w32-%d", i), "2026-W32", 0); r.Episode.Sequence != i {
			t.Fatalf("W32 allocation %d got sequence %d", i, r.Episode.Sequence)
		}
	}
	r := alloc(t, l, "weekly", "w33-0", "2026-W33", 0)
	if r.Episode.Sequence != 0 || r.Episode.ID != "2026-W33-0" {
		t.Fatalf("first of a new period: %+v", r.Episode)
	}
	if r := alloc(t, l, "weekly", "w33-1", "2026-W33", 0); r.Episode.ID != "2026-W33-1" {
		t.Fatalf("second of the new period: %+v", r.Episode)
	}
	if r := alloc(t, l, "weekly", "w32-3", "2026-W32", 0); r.Episode.ID != "2026-W32-3" {
		t.Fatalf("back in the old period: %+v", r.Episode)
	}
	all, err := l.ListEpisodes(ctxT(t), "weekly", "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	if want := []string{"2026-W32-0", "2026-W32-1", "2026-W32-2", "2026-W32-3", "2026-W33-0", "2026-W33-1"}; !slices.Equal(ids, want) {
		t.Fatalf("ListEpisodes(all) = %v, want %v", ids, want)
	}
}

func testCapSkips(t *testing.T, l *Ledger) {
	alloc(t, l, "capped", "a", "2026-W32", 2)
	alloc(t, l, "capped", "b", "2026-W32", 2)
	before := countRows(t, l, "episodes")
	r := alloc(t, l, "capped", "c", "2026-W32", 2)
	if r.Decision != DecisionSkipped || r.Reason != ReasonCapReached || r.Episode != (Episode{}) {
		t.Fatalf("over the cap: got %+v, want skipped/cap_reached with no episode", r)
	}
	if after := countRows(t, l, "episodes"); after != before {
		t.Fatalf("a skip wrote: %d -> %d episodes", before, after)
	}
	if _, err := l.EpisodeByKey(ctxT(t), "capped", "c"); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("skipped key got bound: %v", err)
	}
	// A key bound before the cap was reached is still reused: a retry of a
	// run that got an episode must not be told it was skipped.
	if r := alloc(t, l, "capped", "b", "2026-W32", 2); r.Decision != DecisionReused || r.Episode.ID != "2026-W32-1" {
		t.Fatalf("bound key at the cap: %+v", r)
	}
	// The cap is per period.
	if r := alloc(t, l, "capped", "c", "2026-W33", 2); r.Decision != DecisionAllocated || r.Episode.ID != "2026-W33-0" {
		t.Fatalf("next period: %+v", r)
	}
}

func testAmbiguous(t *testing.T, l *Ledger) {
	alloc(t, l, "weekly", "dup", "2026-W32", 0)
	alloc(t, l, "weekly", "fine", "2026-W32", 0)
	rawExec(t, l, `DROP INDEX episodes_pipeline_key_uniq`)
	rawInsertEpisode(t, l, "weekly", "2026-W32-2", "2026-W32", 2, "dup")
	before := countRows(t, l, "episodes")

	_, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "dup", Period: "2026-W32", NominalTime: t0})
	if !errors.Is(err, ErrKeyAmbiguous) {
		t.Fatalf("Allocate: got %v, want ErrKeyAmbiguous", err)
	}
	if !strings.Contains(err.Error(), `"dup"`) {
		t.Errorf("error %q does not name the key", err)
	}
	if after := countRows(t, l, "episodes"); after != before {
		t.Fatalf("an ambiguous allocation wrote: %d -> %d", before, after)
	}
	if _, err := l.EpisodeByKey(ctxT(t), "weekly", "dup"); !errors.Is(err, ErrKeyAmbiguous) {
		t.Fatalf("EpisodeByKey: got %v, want ErrKeyAmbiguous", err)
	}
	// Other keys keep working.
	if r := alloc(t, l, "weekly", "fine", "2026-W32", 0); r.Decision != DecisionReused {
		t.Fatalf("unrelated key: %+v", r)
	}

	vs, err := l.Check(ctxT(t), "weekly")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Invariant != 1 || vs[0].Pipeline != "weekly" ||
		!strings.Contains(vs[0].Detail, `"dup"`) || !strings.Contains(vs[0].Detail, "2026-W32-0") || !strings.Contains(vs[0].Detail, "2026-W32-2") {
		t.Fatalf("Check: got %v, want one invariant-1 violation naming key dup and both episodes", vs)
	}
}

func testCheckClean(t *testing.T, l *Ledger) {
	mustCheckClean(t, l, "") // empty ledger
	for i := range 5 {
		alloc(t, l, "weekly", fmt.Sprintf("a%d", i), "2026-W32", 0)
		alloc(t, l, "weekly", fmt.Sprintf("b%d", i), "2026-W33", 0)
		alloc(t, l, "daily", fmt.Sprintf("c%d", i), "2026-08-03", 0)
	}
	mustCheckClean(t, l, "")
	mustCheckClean(t, l, "weekly")
	mustCheckClean(t, l, "no-such-pipeline")
}

func testCheckTampered(t *testing.T, l *Ledger) {
	alloc(t, l, "weekly", "ok-0", "2026-W32", 0)
	alloc(t, l, "daily", "ok-0", "2026-08-03", 0)
	dropUniqueIndexes(t, l)
	// A gap: 0, 2, 5 (1, 3 and 4 missing).
	rawInsertEpisode(t, l, "weekly", "2026-W40-0", "2026-W40", 0, "g0")
	rawInsertEpisode(t, l, "weekly", "2026-W40-2", "2026-W40", 2, "g2")
	rawInsertEpisode(t, l, "weekly", "2026-W40-5", "2026-W40", 5, "g5")
	// A duplicate: sequence 0 twice (a legacy ID avoids the primary key).
	rawInsertEpisode(t, l, "weekly", "2026-W41-0", "2026-W41", 0, "d0")
	rawInsertEpisode(t, l, "weekly", "legacy-7", "2026-W41", 0, "d1")
	// A period that does not start at 0.
	rawInsertEpisode(t, l, "weekly", "2026-W44-1", "2026-W44", 1, "s1")
	// One key in two periods.
	rawInsertEpisode(t, l, "weekly", "2026-W42-0", "2026-W42", 0, "x")
	rawInsertEpisode(t, l, "weekly", "2026-W43-0", "2026-W43", 0, "x")

	vs, err := l.Check(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		inv   int
		parts []string
	}{
		{1, []string{`"x"`, "2026-W42-0", "2026-W43-0"}},
		{2, []string{"2026-W40", "gap", "1", "3..4"}},
		{2, []string{"2026-W41", "duplicate", "2026-W41-0", "legacy-7"}},
		{2, []string{"2026-W44", "gap", "missing: 0"}},
		{3, []string{`"x"`, "2026-W42", "2026-W43"}},
	}
	if len(vs) != len(want) {
		t.Fatalf("Check reported %d violations, want %d: %v", len(vs), len(want), vs)
	}
	for _, w := range want {
		found := false
		for _, v := range vs {
			if v.Invariant != w.inv || v.Pipeline != "weekly" {
				continue
			}
			ok := true
			for _, p := range w.parts {
				ok = ok && strings.Contains(v.Detail, p)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no invariant-%d violation naming %v in %v", w.inv, w.parts, vs)
		}
	}
	// The filter limits the audit to one pipeline.
	mustCheckClean(t, l, "daily")
	if vs2, err := l.Check(ctxT(t), "weekly"); err != nil || len(vs2) != len(want) {
		t.Fatalf("Check(weekly) = %v, %v", vs2, err)
	}
	// Allocate refuses the crossing key rather than guessing.
	if _, err := l.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "x", Period: "2026-W42", NominalTime: t0}); !errors.Is(err, ErrKeyAmbiguous) {
		t.Fatalf("Allocate(x): got %v, want ErrKeyAmbiguous", err)
	}
}

func testComplete(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	first := time.Date(2026, 8, 5, 12, 0, 0, 0, time.UTC)
	got, err := l.CompleteEpisode(ctxT(t), "weekly", ep.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != EpisodeCompleted || !got.CompletedAt.Equal(first) {
		t.Fatalf("completed: %+v", got)
	}
	again, err := l.CompleteEpisode(ctxT(t), "weekly", ep.ID, first.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !again.CompletedAt.Equal(first) || again.Status != EpisodeCompleted {
		t.Fatalf("second completion moved the time: %+v", again)
	}
	stored, err := l.Episode(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored != again {
		t.Fatalf("stored %+v, returned %+v", stored, again)
	}
	// Completion leaves the binding alone: the key is still reused.
	if r := alloc(t, l, "weekly", "k", "2026-W32", 0); r.Decision != DecisionReused || r.Episode.Status != EpisodeCompleted {
		t.Fatalf("after completion: %+v", r)
	}
	if _, err := l.CompleteEpisode(ctxT(t), "weekly", "2026-W32-9", first); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("missing episode: got %v, want ErrEpisodeNotFound", err)
	}
}

func testRunOutcomes(t *testing.T, l *Ledger) {
	at := time.Date(2026, 8, 3, 9, 0, 1, 0, time.UTC)
	o := RunOutcome{
		Pipeline: "weekly", AllocationKey: "k", RunID: "run-1",
		NominalTime: t0, NominalTimeSource: "schedule",
		Outcome: "failed", Reason: "vendor_down", Sequence: -1, RecordedAt: at,
	}
	if _, err := l.RecordRunOutcome(ctxT(t), o); err != nil {
		t.Fatal(err)
	}
	// The retry of the same run overwrites.
	o.Outcome, o.Reason, o.EpisodeID, o.Period, o.Sequence = "allocated", ReasonNewEpisode, "2026-W32-0", "2026-W32", 0
	if _, err := l.RecordRunOutcome(ctxT(t), o); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, l, "run_outcomes"); n != 1 {
		t.Fatalf("%d outcomes after a retried record, want 1", n)
	}
	// Another run of the same key is another outcome.
	later := RunOutcome{
		Pipeline: "weekly", AllocationKey: "k", RunID: "run-2", NominalTime: t0, NominalTimeSource: "input",
		Outcome: "reused", Reason: ReasonKeyBound, EpisodeID: "2026-W32-0", Period: "2026-W32", Sequence: 0, RecordedAt: at.Add(time.Minute),
	}
	if _, err := l.RecordRunOutcome(ctxT(t), later); err != nil {
		t.Fatal(err)
	}
	other := RunOutcome{Pipeline: "daily", AllocationKey: "d", RunID: "r", Outcome: "skipped", Reason: ReasonCapReached, Sequence: -1, RecordedAt: at}
	if _, err := l.RecordRunOutcome(ctxT(t), other); err != nil {
		t.Fatal(err)
	}
	got, err := l.RunOutcomes(ctxT(t), "weekly", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != o || got[1] != later {
		t.Fatalf("RunOutcomes = %+v, want [%+v %+v]", got, o, later)
	}
	got, err = l.RunOutcomes(ctxT(t), "weekly", at.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].RunID != "run-2" {
		t.Fatalf("RunOutcomes(since) = %+v", got)
	}
	if all, err := l.RunOutcomes(ctxT(t), "", time.Time{}); err != nil || len(all) != 3 {
		t.Fatalf("RunOutcomes(all pipelines) = %+v, %v", all, err)
	}
	if _, err := l.RecordRunOutcome(ctxT(t), RunOutcome{Pipeline: "weekly", RunID: "x", Outcome: "failed"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("outcome without key: got %v, want ErrInvalidInput", err)
	}
}

func testPipelinesIndependent(t *testing.T, l *Ledger) {
	a := alloc(t, l, "alpha", "same-key", "2026-W32", 0)
	b := alloc(t, l, "beta", "same-key", "2026-W32", 0)
	if a.Episode.Sequence != 0 || b.Episode.Sequence != 0 || a.Decision != DecisionAllocated || b.Decision != DecisionAllocated {
		t.Fatalf("alpha %+v, beta %+v: each pipeline should start at 0", a, b)
	}
	// The same key in another period is fine in another pipeline.
	if r := alloc(t, l, "gamma", "same-key", "2026-W40", 0); r.Episode.ID != "2026-W40-0" {
		t.Fatalf("gamma: %+v", r)
	}
	if _, err := l.Episode(ctxT(t), "beta", "2026-W40-0"); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("beta sees gamma's episode: %v", err)
	}
}

func testInvalidInput(t *testing.T, l *Ledger) {
	ok := AllocateInput{Pipeline: "weekly", Key: "k", Period: "2026-W32", NominalTime: t0}
	for name, in := range map[string]AllocateInput{
		"no pipeline":     {Key: ok.Key, Period: ok.Period, NominalTime: ok.NominalTime},
		"no key":          {Pipeline: ok.Pipeline, Period: ok.Period, NominalTime: ok.NominalTime},
		"no period":       {Pipeline: ok.Pipeline, Key: ok.Key, NominalTime: ok.NominalTime},
		"no nominal time": {Pipeline: ok.Pipeline, Key: ok.Key, Period: ok.Period},
		"negative cap":    {Pipeline: ok.Pipeline, Key: ok.Key, Period: ok.Period, NominalTime: ok.NominalTime, MaxPerPeriod: -1},
	} {
		if _, err := l.Allocate(ctxT(t), in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", name, err)
		}
	}
	if n := countRows(t, l, "episodes"); n != 0 {
		t.Fatalf("invalid input wrote %d episodes", n)
	}
	if _, err := l.ListEpisodes(ctxT(t), "", ""); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("ListEpisodes without pipeline: %v", err)
	}
}

func testLookups(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	_, err := l.Episode(ctxT(t), "weekly", "2026-W32-7")
	if !errors.Is(err, ErrEpisodeNotFound) || !strings.Contains(err.Error(), `"weekly"`) || !strings.Contains(err.Error(), "2026-W32-7") {
		t.Fatalf("Episode(missing): %v, want ErrEpisodeNotFound naming pipeline and episode", err)
	}
	if _, err := l.Episode(ctxT(t), "weekly", ""); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("Episode(no ID): %v, want ErrEpisodeNotFound", err)
	}
	got, err := l.EpisodeByKey(ctxT(t), "weekly", "k")
	if err != nil || got != ep {
		t.Fatalf("EpisodeByKey = %+v, %v; want %+v", got, err, ep)
	}
	if _, err := l.EpisodeByKey(ctxT(t), "weekly", "nope"); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("EpisodeByKey(missing): %v", err)
	}
	if eps, err := l.ListEpisodes(ctxT(t), "weekly", "2026-W01"); err != nil || len(eps) != 0 {
		t.Fatalf("ListEpisodes(empty period) = %v, %v", eps, err)
	}
}

func testSteps(t *testing.T, l *Ledger) {
	err := l.RecordStep(ctxT(t), StepRecord{Pipeline: "weekly", EpisodeID: "2026-W32-0", Step: "plan", Status: "completed"})
	if !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("RecordStep on a missing episode: %v", err)
	}
	if _, err := l.Steps(ctxT(t), "weekly", "2026-W32-0"); !errors.Is(err, ErrEpisodeNotFound) {
		t.Fatalf("Steps of a missing episode: %v", err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	if steps, err := l.Steps(ctxT(t), "weekly", ep.ID); err != nil || len(steps) != 0 {
		t.Fatalf("Steps of a new episode = %v, %v", steps, err)
	}
	at := time.Date(2026, 8, 3, 10, 0, 0, 0, time.UTC)
	recs := []StepRecord{
		{Pipeline: "weekly", EpisodeID: ep.ID, Step: "plan", Status: "completed", Artifact: "/a/plan.json", SHA256: "aa", CompletedAt: at},
		{Pipeline: "weekly", EpisodeID: ep.ID, Step: "assemble", Status: "completed", Artifact: "/a/manifest.json", SHA256: "bb", CompletedAt: at.Add(2 * time.Minute)},
		{Pipeline: "weekly", EpisodeID: ep.ID, Step: "b-same-time", Status: "completed", CompletedAt: at.Add(2 * time.Minute)},
	}
	for _, r := range recs {
		if err := l.RecordStep(ctxT(t), r); err != nil {
			t.Fatal(err)
		}
	}
	// Re-running plan replaces its record.
	recs[0].SHA256, recs[0].CompletedAt = "cc", at.Add(time.Minute)
	if err := l.RecordStep(ctxT(t), recs[0]); err != nil {
		t.Fatal(err)
	}
	got, err := l.Steps(ctxT(t), "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []StepRecord{recs[0], recs[1], recs[2]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Steps =\n%+v\nwant\n%+v", got, want)
	}
	if err := l.RecordStep(ctxT(t), StepRecord{Pipeline: "weekly", EpisodeID: ep.ID, Status: "completed"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("RecordStep without a step name: %v", err)
	}
}

// testOnlyOpenCreates: where there is no ledger (no SQLite file, a
// PostgreSQL schema without allot's tables), OpenExisting and OpenReadOnly
// refuse with ErrNotCreated and create nothing; Open creates it and says
// so, once; after that OpenExisting writes it.
func testOnlyOpenCreates(t *testing.T, url string) {
	for name, open := range map[string]func(context.Context, string) (*Ledger, error){"OpenExisting": OpenExisting, "OpenReadOnly": OpenReadOnly} {
		for range 2 { // the second proves the first created nothing
			if l, err := open(ctxT(t), url); !errors.Is(err, ErrNotCreated) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("%s where there is no ledger = %v, want ErrNotCreated", name, err)
			}
		}
	}
	if sqlitePath, ok := strings.CutPrefix(url, "sqlite:"); ok {
		if _, err := os.Stat(sqlitePath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused open left %s: %v", sqlitePath, err)
		}
	}
	for i, want := range []bool{true, false} {
		l, err := Open(ctxT(t), url)
		if err != nil {
			t.Fatal(err)
		}
		if l.Created() != want {
			t.Errorf("Open number %d: Created() = %v, want %v", i+1, l.Created(), want)
		}
		l.Close()
	}
	l, err := OpenExisting(ctxT(t), url)
	if err != nil {
		t.Fatalf("OpenExisting of the ledger Open created: %v", err)
	}
	defer l.Close()
	if l.Created() {
		t.Error("OpenExisting says it created the ledger")
	}
	if r := alloc(t, l, "weekly", "k", "2026-W32", 0); r.Decision != DecisionAllocated {
		t.Fatalf("OpenExisting's ledger did not allocate: %+v", r)
	}
}

// testIdentityCreatedOnceAndKept: the ledger's identity is created by the
// first read-write open, concurrent first opens agree on it, and every
// later open (read-write or read-only) reads the same one; a read-only open
// of a ledger that never had one creates none.
func testIdentityCreatedOnceAndKept(t *testing.T, url string) {
	ro, err := OpenReadOnly(ctxT(t), url)
	if err == nil {
		if id := ro.ID(); id != "" {
			t.Fatalf("a read-only open of a new ledger has identity %q", id)
		}
		ro.Close()
	}
	ids, err := openTogether(t, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("concurrent first opens got identities %q, want one", ids)
		}
	}
	again := openURLT(t, url)
	ro2, err := OpenReadOnly(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer ro2.Close()
	if again.ID() != ids[0] || ro2.ID() != ids[0] {
		t.Fatalf("after reopening: %q (read-write), %q (read-only), want %q", again.ID(), ro2.ID(), ids[0])
	}
}

// openTogether opens the ledger at url from n goroutines at once, as
// workers starting together would, and closes each; it returns the
// identity each open saw and every error.
func openTogether(t *testing.T, url string, n int) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Connections of its own: one process each.
			l, err := openAlone(ctxT(t), url, openCreate)
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = l.ID()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}
