package ledger

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// Conformance tests for Audit (registered in runConformance): a ledger
// built through the API is clean, and each kind of violation planted in it
// (raw SQL around the API) is reported, alone, naming its subject. The
// checks on files and on a vendor's bill are report.Check's
// (internal/report/check_test.go).

// auditLater is when the planted ledgers are audited: everything written
// now is older than the stale threshold by then.
func auditLater() time.Time { return time.Now().Add(2 * DefaultStaleAfter) }

// realLedger is one pipeline's worth of ordinary history, as the workflows
// write it: a (completed, every step done, its run allocated and a second
// run reusing it), b (running, its video submitted, its run allocated), c
// (imported).
type realLedger struct {
	p       string
	a, b, c Episode
}

func recordRun(t *testing.T, l *Ledger, pipeline, key, runID string, outcome allot.Outcome, reason, episodeID string) {
	t.Helper()
	if _, err := l.RecordRunOutcome(ctxT(t), RunOutcome{Pipeline: pipeline, AllocationKey: key, RunID: runID, NominalTime: t0,
		NominalTimeSource: allot.NominalFromInput, Outcome: outcome, Reason: reason, EpisodeID: episodeID, Sequence: -1}); err != nil {
		t.Fatalf("RecordRunOutcome(%s, %s): %v", key, runID, err)
	}
}

func buildRealLedger(t *testing.T, l *Ledger, p string) realLedger {
	t.Helper()
	ctx := ctxT(t)
	r := realLedger{p: p}
	for i, ep := range []*Episode{&r.a, &r.b} {
		key := fmt.Sprintf("%s/scheduled-%d", p, i)
		*ep = alloc(t, l, p, key, "2026-W32", 0).Episode
		recordRun(t, l, p, key, "run-"+key, allot.OutcomeAllocated, ReasonNewEpisode, ep.ID)
		if _, err := l.PinPlan(ctx, p, ep.ID, importPlan); err != nil {
			t.Fatal(err)
		}
		mustEpisodeOutcome(t, l, p, ep.ID, allot.OutcomeRunning, "", time.Time{})
	}
	recordRun(t, l, p, r.a.AllocationKey, "run-again", allot.OutcomeReused, ReasonKeyBound, r.a.ID)

	for _, step := range []string{"video", "cover"} {
		ref := paidRef(r.a, step, 0)
		mustIntent(t, l, ref)
		mustSubmit(t, l, ref, fmt.Sprintf("vt_%s_a_%s", p, step), 250)
		mustResult(t, l, ref, fmt.Sprintf("vt_%s_a_%s", p, step))
	}
	if err := l.RecordStep(ctx, StepRecord{Pipeline: p, EpisodeID: r.a.ID, Step: "assemble", Status: allot.StepCompleted,
		Outputs: []StepOutput{{Path: "/data/" + p + "/manifest.json", SHA256: "sha-manifest"}}}); err != nil {
		t.Fatal(err)
	}
	mustDecide(t, l, decision(r.a, "approve-1", allot.ActionApprove, "approve"))
	publish := paidRef(r.a, "publish", 0)
	mustIntent(t, l, publish)
	if _, err := l.RecordSubmission(ctx, Submission{PaidTaskRef: publish, RemoteRef: "pub_" + p + "_a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompleteEpisode(ctx, p, r.a.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	mustEpisodeOutcome(t, l, p, r.a.ID, allot.OutcomeCompleted, "", time.Time{})

	video := paidRef(r.b, "video", 0)
	mustIntent(t, l, video)
	mustSubmit(t, l, video, "vt_"+p+"_b_video", 250)

	res := mustImport(t, l, importBatch(p, importRecord(p, "old-1", w31Mon)))
	r.c = mustEpisode(t, l, p, res.Episodes[0].EpisodeID)
	return r
}

// auditKinds audits one pipeline later and lists what it found as
// "kind episode", sorted.
func auditKinds(t *testing.T, l *Ledger, pipeline string) ([]string, []Violation) {
	t.Helper()
	a, err := l.Audit(ctxT(t), AuditOptions{Pipeline: pipeline, Now: auditLater()})
	if err != nil {
		t.Fatalf("Audit(%s): %v", pipeline, err)
	}
	var out []string
	for _, v := range a.Violations {
		if v.Pipeline != pipeline || v.Detail == "" {
			t.Errorf("violation %+v: want pipeline %s and a detail", v, pipeline)
		}
		out = append(out, v.Kind+" "+v.Episode)
	}
	slices.Sort(out)
	return out, a.Violations
}

func testAuditClean(t *testing.T, l *Ledger) {
	r := buildRealLedger(t, l, "clean")
	if got, vs := auditKinds(t, l, "clean"); len(got) != 0 {
		t.Fatalf("audit of an ordinary ledger: %v", vs)
	}
	a, err := l.Audit(ctxT(t), AuditOptions{Now: auditLater(), WithRefs: true})
	if err != nil || len(a.Violations) != 0 {
		t.Fatalf("audit of every pipeline: %v, %v", a.Violations, err)
	}
	// What the caller checks further: the files, and the costs with their
	// steps' kinds (for a vendor's bill).
	var files []string
	for _, f := range a.Artifacts {
		files = append(files, fmt.Sprintf("%s %s/%d paid=%v", f.EpisodeID, f.Step, f.Revision, f.Paid))
	}
	slices.Sort(files)
	wantFiles := []string{
		r.a.ID + " assemble/0 paid=false", r.a.ID + " cover/0 paid=true", r.a.ID + " video/0 paid=true",
		r.c.ID + " assemble/0 paid=false", r.c.ID + " cover/0 paid=true", r.c.ID + " video/0 paid=true",
	}
	slices.Sort(wantFiles)
	if !slices.Equal(files, wantFiles) {
		t.Errorf("artifacts %v, want %v", files, wantFiles)
	}
	var costs []string
	for _, c := range a.Costs {
		costs = append(costs, fmt.Sprintf("%s %s %s %d", c.RemoteRef, c.StepKind, c.EpisodeID, c.Amount))
	}
	slices.Sort(costs)
	if len(costs) != 5 || !strings.HasPrefix(costs[0], "vt_clean_a_cover paid") {
		t.Errorf("costs %v", costs)
	}
	if len(a.Tasks) != 7 { // a: 3 with references; b: 1; c: 3
		t.Errorf("WithRefs listed %d tasks, want 7: %+v", len(a.Tasks), a.Tasks)
	}
	// Fresh data is not reported before it is stale: an intent of now.
	mustIntent(t, l, paidRef(r.b, "cover", 0))
	if a, err := l.Audit(ctxT(t), AuditOptions{Pipeline: "clean"}); err != nil || len(a.Violations) != 0 {
		t.Fatalf("an intent of now: %v, %v", a.Violations, err)
	}
}

// testAuditPlanted plants one violation per case in its own pipeline's
// ordinary history and wants exactly that violation.
func testAuditPlanted(t *testing.T, l *Ledger) {
	q := func(query string, args ...any) { t.Helper(); rawExec(t, l, query, args...) }
	for _, tc := range []struct {
		name  string
		plant func(r realLedger)
		want  func(r realLedger) []string // "kind episode"
	}{
		{"key_ambiguous", func(r realLedger) {
			q(`DROP INDEX IF EXISTS episodes_pipeline_key_uniq`)
			q(`INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, outcome, outcome_reason)
				VALUES (?, '2026-W32-2', '2026-W32', 2, ?, ?, ?, 'allocated', 'running', 'in_progress')`, r.p, r.a.AllocationKey, l.d.timeArg(t0), l.d.timeArg(t0))
			recordRun(t, l, r.p, r.a.AllocationKey, "run-dup", allot.OutcomeAllocated, ReasonNewEpisode, "2026-W32-2")
		}, func(r realLedger) []string { return []string{"key_ambiguous "} }},
		{"key_crosses_period", func(r realLedger) {
			q(`DROP INDEX IF EXISTS episodes_pipeline_key_uniq`)
			q(`INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, outcome, outcome_reason)
				VALUES (?, '2026-W40-0', '2026-W40', 0, ?, ?, ?, 'allocated', 'running', 'in_progress')`, r.p, r.a.AllocationKey, l.d.timeArg(t0), l.d.timeArg(t0))
			recordRun(t, l, r.p, r.a.AllocationKey, "run-dup", allot.OutcomeAllocated, ReasonNewEpisode, "2026-W40-0")
		}, func(r realLedger) []string { return []string{"key_ambiguous ", "key_crosses_period "} }},
		{"sequence_duplicate", func(r realLedger) {
			q(`DROP INDEX IF EXISTS episodes_pipeline_period_seq_uniq`)
			q(`UPDATE episodes SET sequence = 0 WHERE pipeline = ? AND episode_id = ?`, r.p, r.b.ID)
		}, func(r realLedger) []string { return []string{"sequence_duplicate "} }},
		{"sequence_gap", func(r realLedger) {
			q(`UPDATE episodes SET sequence = 2 WHERE pipeline = ? AND episode_id = ?`, r.p, r.b.ID)
		}, func(r realLedger) []string { return []string{"sequence_gap "} }},
		{"no_reference", func(r realLedger) {
			q(`UPDATE paid_tasks SET remote_ref = '' WHERE pipeline = ? AND episode_id = ? AND step = 'publish'`, r.p, r.a.ID)
		}, func(r realLedger) []string { return []string{"no_reference " + r.a.ID} }},
		{"reference_shared", func(r realLedger) {
			q(`DROP INDEX IF EXISTS paid_tasks_remote_ref_uniq`)
			q(`UPDATE paid_tasks SET remote_ref = ? WHERE pipeline = ? AND episode_id = ? AND step = 'publish'`, "pub_"+r.p+"_a", r.p, r.c.ID)
		}, func(r realLedger) []string { return []string{"reference_shared "} }},
		{"idempotency_shared", func(r realLedger) {
			q(`DROP INDEX IF EXISTS paid_tasks_idempotency_key_uniq`)
			q(`UPDATE paid_tasks SET idempotency_key = ? WHERE pipeline = ? AND episode_id = ? AND step = 'publish'`,
				testKey(paidRef(r.a, "publish", 0)), r.p, r.c.ID)
		}, func(r realLedger) []string { return []string{"idempotency_shared "} }},
		{"cost_orphan", func(r realLedger) {
			rawInsertCost(t, l, "vt_"+r.p+"_nobody", paidRef(r.a, "video", 7), 99)
		}, func(r realLedger) []string { return []string{"cost_orphan " + r.a.ID} }},
		{"cost_misbooked", func(r realLedger) {
			q(`UPDATE cost_entries SET revision = 1 WHERE remote_ref = ?`, "vt_"+r.p+"_a_video")
		}, func(r realLedger) []string { return []string{"cost_misbooked " + r.a.ID} }},
		{"cost_missing", func(r realLedger) {
			q(`DELETE FROM cost_entries WHERE remote_ref = ?`, "vt_"+r.p+"_a_video")
		}, func(r realLedger) []string { return []string{"cost_missing " + r.a.ID} }},
		{"cost_on_effect", func(r realLedger) {
			rawInsertCost(t, l, "pub_"+r.p+"_a", paidRef(r.a, "publish", 0), 10)
		}, func(r realLedger) []string { return []string{"cost_on_effect " + r.a.ID} }},
		{"cost_out_of_range", func(r realLedger) {
			// Written around the ledger's bound, as an import before v10 could.
			q(`UPDATE cost_entries SET amount = ? WHERE remote_ref = ?`, allot.MaxAmount+1, "vt_"+r.p+"_a_video")
		}, func(r realLedger) []string { return []string{"cost_out_of_range " + r.a.ID} }},
		{"cost_out_of_range total", func(r realLedger) {
			// Two entries that wrap around int64 when summed: each out of
			// range, and the total refused rather than wrong.
			q(`UPDATE cost_entries SET amount = ? WHERE remote_ref IN (?, ?)`, int64(math.MaxInt64), "vt_"+r.p+"_a_video", "vt_"+r.p+"_a_cover")
		}, func(r realLedger) []string {
			return []string{"cost_out_of_range " + r.a.ID, "cost_out_of_range " + r.a.ID, "cost_out_of_range " + r.a.ID}
		}},
		{"unknown_outcome", func(r realLedger) {
			mustIntent(t, l, paidRef(r.b, "cover", 0))
		}, func(r realLedger) []string { return []string{"unknown_outcome " + r.b.ID} }},
		{"no_outcome", func(r realLedger) {
			q(`UPDATE episodes SET outcome = '', outcome_reason = '' WHERE pipeline = ? AND episode_id = ?`, r.p, r.b.ID)
		}, func(r realLedger) []string { return []string{"no_outcome " + r.b.ID} }},
		{"no_reason", func(r realLedger) {
			q(`UPDATE episodes SET outcome = 'needs_attention', outcome_reason = '' WHERE pipeline = ? AND episode_id = ?`, r.p, r.b.ID)
		}, func(r realLedger) []string { return []string{"no_reason " + r.b.ID} }},
		{"step_incomplete", func(r realLedger) {
			q(`DELETE FROM step_records WHERE pipeline = ? AND episode_id = ? AND step = 'assemble'`, r.p, r.a.ID)
		}, func(r realLedger) []string { return []string{"step_incomplete " + r.a.ID} }},
		{"step_incomplete imported", func(r realLedger) {
			q(`UPDATE paid_tasks SET state = 'submitted' WHERE pipeline = ? AND episode_id = ? AND step = 'cover'`, r.p, r.c.ID)
		}, func(r realLedger) []string { return []string{"step_incomplete " + r.c.ID} }},
		{"plan_invalid", func(r realLedger) {
			q(`UPDATE episodes SET plan = 'steps: video' WHERE pipeline = ? AND episode_id = ?`, r.p, r.a.ID)
		}, func(r realLedger) []string { return []string{"plan_invalid " + r.a.ID} }},
		{"run_lost", func(r realLedger) {
			q(`DELETE FROM run_outcomes WHERE pipeline = ? AND allocation_key = ?`, r.p, r.b.AllocationKey)
		}, func(r realLedger) []string { return []string{"run_lost " + r.b.ID} }},
		{"run_no_reason", func(r realLedger) {
			q(`UPDATE run_outcomes SET reason = '' WHERE pipeline = ? AND run_id = 'run-again'`, r.p)
		}, func(r realLedger) []string { return []string{"run_no_reason " + r.a.ID} }},
		{"run_episode_missing", func(r realLedger) {
			recordRun(t, l, r.p, r.p+"/scheduled-9", "run-9", allot.OutcomeReused, ReasonKeyBound, "2026-W40-9")
		}, func(r realLedger) []string { return []string{"run_episode_missing 2026-W40-9"} }},
		{"allocated_runs", func(r realLedger) {
			recordRun(t, l, r.p, r.a.AllocationKey, "run-twice", allot.OutcomeAllocated, ReasonNewEpisode, r.a.ID)
		}, func(r realLedger) []string { return []string{"allocated_runs " + r.a.ID} }},
		{"import_episode", func(r realLedger) {
			if l.d.name == postgresDialect.name {
				q(`ALTER TABLE imports DROP CONSTRAINT IF EXISTS imports_episode_fk`)
			} else {
				q(`PRAGMA foreign_keys = OFF`) // the writer pool's one connection
				t.Cleanup(func() { rawExec(t, l, `PRAGMA foreign_keys = ON`) })
			}
			q(`INSERT INTO imports (pipeline, old_id, episode_id, source, digest, imported_at) VALUES (?, 'ghost', '2026-W20-0', 'x', 'y', ?)`,
				r.p, l.d.timeArg(t0))
		}, func(r realLedger) []string { return []string{"import_episode 2026-W20-0"} }},
		{"import_key", func(r realLedger) {
			q(`UPDATE episodes SET allocation_key = ? WHERE pipeline = ? AND episode_id = ?`, r.p+"/legacy/old-2", r.p, r.c.ID)
		}, func(r realLedger) []string { return []string{"import_key " + r.c.ID} }},
		{"import_metadata", func(r realLedger) {
			q(`DELETE FROM imports WHERE pipeline = ?`, r.p)
		}, func(r realLedger) []string { return []string{"import_metadata " + r.c.ID} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := "p-" + strings.ReplaceAll(strings.ReplaceAll(tc.name, "_", "-"), " ", "-")
			r := buildRealLedger(t, l, p)
			if got, vs := auditKinds(t, l, p); len(got) != 0 {
				t.Fatalf("before planting: %v", vs)
			}
			tc.plant(r)
			got, vs := auditKinds(t, l, p)
			if want := tc.want(r); !slices.Equal(got, want) {
				t.Fatalf("audit found %v, want exactly %v:\n%v", got, want, vs)
			}
			for _, v := range vs {
				if v.Kind == KindUnknownOutcome && v.Fix != allot.LookupCommand(p, r.b.ID, "cover") {
					t.Errorf("unknown_outcome's fix is %q, want the lookup command", v.Fix)
				}
			}
		})
	}
}
